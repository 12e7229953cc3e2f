"""Samsa: a Kafka-wire-compatible broker written in Python.

Everything is imported under this one name: samsa.broker, samsa.config, samsa.coordinator,
samsa.protocol, samsa.storage, and samsa.testing (a broker for tests: see its docstring).

In the repository the five packages are folders at its top. An install maps them under this
name (pyproject.toml's `package-dir`: the wheel copies them under samsa/, `pip install -e`
installs setuptools' finder); a checkout that is only on sys.path (`python -m samsa` run in
another worktree, the benchmarks' source trees) finds them beside samsa/ through
`_CheckoutFinder` below. Either way `samsa.broker.app` is one file, broker/app.py.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from importlib.abc import MetaPathFinder
from importlib.machinery import ModuleSpec
from importlib.util import spec_from_file_location
from pathlib import Path
from types import ModuleType

__all__ = ["__version__"]

_FOLDERS = ("broker", "config", "coordinator", "protocol", "storage")


class _CheckoutFinder(MetaPathFinder):
    """samsa.<folder> of a source checkout: the folder beside samsa/ (only the five)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        head, _, folder = fullname.partition(".")
        if head != __name__ or folder not in _FOLDERS:
            return None
        init = self.root / folder / "__init__.py"
        return spec_from_file_location(fullname, init,
                                       submodule_search_locations=[str(init.parent)])


def _find_checkout_packages() -> None:
    here = Path(__file__).resolve().parent
    if (here / "broker").exists():  # installed from the wheel: the packages are under samsa/
        return
    root = here.parent
    if all((root / folder / "__init__.py").is_file() for folder in _FOLDERS):
        # first, so that this checkout's folders win over another tree's editable install
        sys.meta_path.insert(0, _CheckoutFinder(root))


_find_checkout_packages()


def __getattr__(name: str) -> str:
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("samsa")
        except PackageNotFoundError:  # a source checkout on PYTHONPATH
            return "0+unknown"
    raise AttributeError(name)
