"""The package list, which pyproject.toml cannot derive: `samsa` and the five folders at the top
of the repository that its `package-dir` maps under that name (samsa.broker is broker/, ...),
each with the sub-packages found in it. Everything else is in pyproject.toml."""

import tomllib
from pathlib import Path

from setuptools import find_packages, setup

HERE = Path(__file__).resolve().parent
PACKAGE_DIR: dict[str, str] = tomllib.loads((HERE / "pyproject.toml").read_text())[
    "tool"]["setuptools"]["package-dir"]

setup(packages=[
    f"{name}{sub}"
    for name, folder in PACKAGE_DIR.items()
    for sub in ["", *(f".{p}" for p in find_packages(str(HERE / folder)))]
])
