"""One spelling of every module: the five folders at the top of the repository are samsa.broker,
samsa.config, ... through pyproject.toml's package-dir (and, in a checkout that is only on
sys.path, samsa/__init__.py's finder), not through symbolic links that give each file a second
path."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("broker", "config", "coordinator", "protocol", "storage")


def test_the_tree_holds_no_symbolic_link() -> None:
    res = subprocess.run(["git", "ls-files", "-s"], cwd=ROOT, capture_output=True, text=True)
    if res.returncode != 0:
        pytest.skip("not a git checkout")
    links = [line.split("\t")[1] for line in res.stdout.splitlines() if line.startswith("120000")]
    assert links == []


def test_a_checkout_on_sys_path_imports_the_folders_themselves(tmp_path: Path) -> None:
    """Without site-packages (no editable install's finder), PYTHONPATH alone: samsa.<folder>
    is the folder's own file, under no other path (found, not run: -S has no dependencies)."""
    code = "from importlib.util import find_spec; " \
           f"print('\\n'.join(find_spec(f'samsa.{{f}}').origin for f in {FOLDERS!r}))"
    out = subprocess.run([sys.executable, "-S", "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, env={"PYTHONPATH": str(ROOT)}, check=True).stdout.split()
    assert out == [str(ROOT / f / "__init__.py") for f in FOLDERS]
