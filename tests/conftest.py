"""Fixtures shared by every test package.

    broker           a fresh `samsa serve` process per test (own port and data dir)
    shared_broker    one process for the whole session; tests must use unique topic names
    broker_factory   broker_factory(settings={...}) -> started BrokerProcess, closed after the test
    unique_topic     a topic name unique to this test

Under `pytest -n 2 --dist loadgroup` a module, a package of tests/support/xdist_units.py's or
an xdist_group is run by one worker, so a module- or package-scoped fixture starts once.

When a test fails, the tail of the log of every broker it used is added to its report.
"""

from __future__ import annotations

import os
import re
import uuid
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from samsa.testing import _Served
from tests.cluster.cluster import Cluster
from tests.support.broker import STARTED_THIS_TEST, BrokerProcess, kill_all_live

# Every broker the tests start compares each response protocol/encoder.py writes with kio's
# bytes for the same dict (broker/network/dispatch.py), and drops the connection on a difference.
os.environ.setdefault("SAMSA_CHECK_ENCODER", "1")

# The scheduler of `pytest -n 2 --dist loadgroup` (make test), as said above.
pytest_plugins = ("tests.support.xdist_units",)

_shared: BrokerProcess | None = None


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path / "data", name="broker")
    b.start()
    try:
        yield b
    finally:
        b.close()


@pytest.fixture(scope="session")
def shared_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    global _shared
    base = tmp_path_factory.mktemp("shared-broker")
    b = BrokerProcess(base / "data", name="shared-broker")
    b.start()
    _shared = b
    try:
        yield b
    finally:
        _shared = None
        b.close()


class BrokerFactory:
    def __init__(self, base: Path) -> None:
        self.base = base
        self.brokers: list[BrokerProcess] = []

    def __call__(
        self,
        settings: Mapping[str, object] | None = None,
        *,
        start: bool = True,
        **kwargs: object,
    ) -> BrokerProcess:
        n = len(self.brokers)
        b = BrokerProcess(
            self.base / f"broker{n}" / "data", settings=settings, name=f"broker{n}", **kwargs
        )
        self.brokers.append(b)
        return b.start() if start else b

    def close(self) -> None:
        for b in self.brokers:
            b.close()


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[BrokerFactory]:
    f = BrokerFactory(tmp_path)
    try:
        yield f
    finally:
        f.close()


@pytest.fixture
def unique_topic(request: pytest.FixtureRequest) -> str:
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", request.node.name)[:150]
    return f"{name}-{uuid.uuid4().hex[:8]}"


# ---------------------------------------------------------------------------- hooks
def pytest_configure(config: pytest.Config) -> None:
    # kafka-python loads its protocol schemas with a deprecated importlib API, once per
    # schema: hundreds of identical warnings that hide the useful ones.
    config.addinivalue_line("filterwarnings", "ignore::DeprecationWarning:kafka.protocol.*")
    config.addinivalue_line("filterwarnings", "ignore:open_text is deprecated:DeprecationWarning")


def pytest_runtest_setup(item: pytest.Item) -> None:
    STARTED_THIS_TEST.clear()
    # A shared broker that died in an earlier test would fail every later one: restart it.
    if _shared is not None and "shared_broker" in getattr(item, "fixturenames", ()):
        if not _shared.is_running():
            warnings.warn(
                f"shared broker had exited (code {_shared.last_returncode}); restarting it "
                f"for {item.nodeid}\n{_shared.log_tail(30)}",
                stacklevel=1,
            )
            _shared.kill9()
            _shared.start()


def _brokers_of(item: pytest.Item) -> list[BrokerProcess]:
    """The brokers a test used: its broker fixtures', and those it started itself, except a
    Cluster fixture's (the cluster and chaos fixtures add their logs in teardown)."""
    found: list[BrokerProcess] = []
    reported_by_fixture: set[int] = set()
    for value in getattr(item, "funcargs", {}).values():
        if isinstance(value, BrokerProcess):
            found.append(value)
        elif isinstance(value, BrokerFactory):
            found.extend(value.brokers)
        for c in value if isinstance(value, tuple) else (value,):
            if isinstance(c, Cluster):
                reported_by_fixture.update(id(b) for b in c.brokers)
    found += [b for b in STARTED_THIS_TEST if id(b) not in reported_by_fixture]
    return list({id(b): b for b in found}.values())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    outcome = yield
    rep = outcome.get_result()
    if rep.when == "call":
        # Fixtures that own brokers (cluster, chaos) read it in teardown to attach logs.
        item.rep_call = rep  # type: ignore[attr-defined]
    if rep.failed and rep.when in ("setup", "call"):
        for b in _brokers_of(item):
            state = "running" if b.is_running() else f"exited ({b.last_returncode})"
            rep.sections.append((f"{b.name} log ({b.bootstrap}, {state})", b.log_tail(80)))
        for served in _served_of(item):
            rep.sections.append((f"{type(served).__name__} log ({served.bootstrap})",
                                 f"whole log kept at {_keep_log(item, served)}\n"
                                 f"{served.log_tail(150)}"))


def _served_of(item: pytest.Item) -> list[_Served]:
    """The samsa.testing brokers, clusters and nodes among a test's fixtures."""
    found = [v for v in getattr(item, "funcargs", {}).values() if isinstance(v, _Served)]
    return list({id(s): s for s in found}.values())


def _keep_log(item: pytest.Item, served: _Served) -> Path:
    """A copy of the whole log under pytest's base temporary directory: a module-scoped
    fixture's own directory (and its log) is gone once the module ends."""
    kept = item.config._tmp_path_factory.getbasetemp() / "failed-logs"  # type: ignore[attr-defined]
    kept.mkdir(parents=True, exist_ok=True)
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", item.nodeid)[-150:]
    path = kept / f"{name}.log"
    path.write_text(served.log_text())
    return path


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    kill_all_live()
