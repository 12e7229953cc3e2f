"""Fixtures of the handler specs: a broker's handlers on real storage and coordinators in the
test's own directory, called in-process (tests/handlers/harness.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from .harness import Handlers


@pytest.fixture
async def handlers(tmp_path: Path) -> AsyncIterator[Handlers]:
    h = await Handlers.open(tmp_path / "data")
    try:
        yield h
    finally:
        await h.close()


@pytest.fixture
async def secured(tmp_path: Path) -> AsyncIterator[Handlers]:
    """Kafka's ACL authorizer, no ACLs: only the super user User:admin may act."""
    h = await Handlers.open(tmp_path / "data", authorizer=True)
    try:
        yield h
    finally:
        await h.close()
