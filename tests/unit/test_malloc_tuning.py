"""broker/malloc_tuning.py: fixed glibc thresholds unless the user set them."""

import platform

import pytest

from samsa.broker.malloc_tuning import tune_malloc


def test_thresholds_are_set_on_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)
    assert tune_malloc() is (platform.libc_ver()[0] == "glibc")


@pytest.mark.parametrize("var", ["MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_"])
def test_the_users_settings_win(monkeypatch: pytest.MonkeyPatch, var: str) -> None:
    monkeypatch.setenv(var, "131072")
    assert tune_malloc() is False
