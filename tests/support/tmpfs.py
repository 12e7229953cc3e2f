"""A deliberately small file system for disk-full tests: a tmpfs mounted for one test.

    with small_tmpfs(tmp_path / "small", "2m") as mount:   # skips unless root and mount works
        ...                                                # ENOSPC once ~2 MiB are written
        grow(mount, "16m")                                 # room again (data kept)
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def small_tmpfs(path: Path, size: str) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs (to fill a log dir) needs root")
    path.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs",
                        str(path)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        yield path
    finally:
        # Lazy: a broker that is still being torn down may hold files open there.
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def grow(path: Path, size: str) -> None:
    subprocess.run(["mount", "-o", f"remount,size={size}", str(path)], check=True,
                   capture_output=True)
