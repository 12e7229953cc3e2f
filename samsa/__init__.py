"""Samsa: a Kafka-wire-compatible broker written in Python.

Everything is imported under this one name: samsa.broker, samsa.config, samsa.coordinator,
samsa.protocol, samsa.storage, and samsa.testing (a broker for tests: see its docstring).

In the repository the five packages are folders at its top; samsa/<pkg> are symbolic links to
them, so a checkout on PYTHONPATH, an editable install and the wheel (where setuptools has
copied the files under samsa/) all import the same names.
"""

from __future__ import annotations

__all__ = ["__version__"]


def __getattr__(name: str) -> str:
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("samsa")
        except PackageNotFoundError:  # a source checkout on PYTHONPATH
            return "0+unknown"
    raise AttributeError(name)
