"""Shared by the security tests: one CA and its certificates per module."""

from __future__ import annotations

import pytest

from tests.security.certs import Certs, make_certs


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))
