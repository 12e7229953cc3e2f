"""The `pytest11` entry point of the samsa distribution. Installing Samsa activates nothing:
this only adds the `samsa` ini setting, and with `samsa = true` (pytest.ini, or
[tool.pytest.ini_options] in pyproject.toml) registers samsa.testing's fixtures. `-p
samsa.testing` or `pytest_plugins = ["samsa.testing"]` opt in without it."""

from __future__ import annotations

from typing import Any


def pytest_addoption(parser: Any) -> None:
    parser.addini("samsa", type="bool", default=False,
                  help="load samsa.testing (samsa_broker, samsa_session_broker, samsa_cluster)")


def pytest_configure(config: Any) -> None:
    if config.getini("samsa") and not config.pluginmanager.has_plugin("samsa.testing"):
        import samsa.testing

        config.pluginmanager.register(samsa.testing, "samsa.testing")
