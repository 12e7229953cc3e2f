"""The other Python versions of `make test`: where they are, and what their runs leave out.

`make test` runs the whole suite on the default interpreter (the Makefile's PYTHON) and the
unit, protocol and Python-client tests once more on each other supported version found on the
machine, each in a venv of its own ($(VENV)-3.12, ...). As a script:

    python tests/support/pyversions.py versions      the other versions found, e.g. "3.12 3.13"
    python tests/support/pyversions.py which 3.12    that version's interpreter

An interpreter is `python3.N` on PATH, else the newest 3.N.x under pyenv's versions; it counts
only if it can make a venv with pip (ensurepip). As a pytest plugin (`-p
tests.support.pyversions`), it skips whatever needs a JVM: Kafka's Java clients and tools run on
the default interpreter's pass alone, where they test the same broker code.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:  # the script runs on the Makefile's PYTHON, which may have no pytest
    import pytest

SUPPORTED = ("3.11", "3.12", "3.13")  # pyproject.toml's classifiers


def _works(python: str, version: str) -> bool:
    code = ("import sys, ensurepip, venv; "
            f"sys.exit(sys.version_info[:2] != {tuple(map(int, version.split('.')))})")
    try:
        return subprocess.run([python, "-c", code], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _pyenv_candidates(version: str) -> list[str]:
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    found = []
    for d in root.glob(f"{version}.*"):
        if re.fullmatch(rf"{re.escape(version)}\.\d+", d.name):  # no 3.13.0rc1, 3.13t
            found.append((int(d.name.rsplit(".", 1)[1]), str(d / "bin" / f"python{version}")))
    return [p for _, p in sorted(found, reverse=True)]


def which(version: str) -> str | None:
    """The interpreter of Python `version` (e.g. "3.12"), or None."""
    on_path = shutil.which(f"python{version}")
    for python in ([on_path] if on_path else []) + _pyenv_candidates(version):
        if _works(python, version):
            return python
    return None


def other_versions(default: str) -> list[str]:
    return [v for v in SUPPORTED if v != default and which(v)]


def _this_version() -> str:
    return f"{sys.version_info[0]}.{sys.version_info[1]}"


def _main(argv: list[str]) -> int:
    if argv[:1] == ["versions"]:
        print(" ".join(other_versions(_this_version())))
        return 0
    if argv[:1] == ["which"] and len(argv) == 2:
        python = which(argv[1])
        if python is None:
            print(f"no Python {argv[1]} with venv support found", file=sys.stderr)
            return 1
        print(python)
        return 0
    print(__doc__, file=sys.stderr)
    return 2


# ---------------------------------------------------------------- the pytest plugin
JAVA_ENTRY_POINTS = ("compile_java", "run_java_tool", "java_executable", "javac_executable",
                     "classpath_dir", "jar_version", "_cp")


def _no_jvm(*_args: Any, **_kwargs: Any) -> NoReturn:
    import pytest

    pytest.skip(f"Java runs in the default interpreter's pass (this is Python {_this_version()})")


def pytest_configure(config: pytest.Config) -> None:
    """Before the test modules import them: every way into a JVM skips the test instead."""
    from tests.support import java

    for name in JAVA_ENTRY_POINTS:
        setattr(java, name, _no_jvm)
    java.JavaProcess.start = _no_jvm  # type: ignore[method-assign]


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
