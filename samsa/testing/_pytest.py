"""The pytest side of samsa.testing: fixtures and the start-up summary. Loaded only with
samsa.testing as a plugin (see its docstring), never by merely installing Samsa."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

import samsa.testing as st


@pytest.fixture
def samsa_broker(request: pytest.FixtureRequest) -> Iterator[st.SamsaBroker]:
    """A broker for this test alone (function scope). Settings: mark the test with
    @pytest.mark.samsa_settings(**{"num.partitions": 3})."""
    marker = request.node.get_closest_marker("samsa_settings")
    settings = dict(marker.kwargs) if marker else {}
    with st.broker(settings) as b:
        yield b


@pytest.fixture(scope="session")
def samsa_session_broker() -> Iterator[st.SamsaBroker]:
    """One broker for the whole session (with pytest-xdist: one per worker); tests should use
    topic names of their own."""
    with st.broker() as b:
        yield b


@pytest.fixture
def samsa_embedded_broker(request: pytest.FixtureRequest) -> Iterator[st.EmbeddedBroker]:
    """A broker on a thread of this process for this test alone, taking request intercepts
    (EmbeddedBroker.intercept). Settings as for samsa_broker (the samsa_settings mark)."""
    marker = request.node.get_closest_marker("samsa_settings")
    settings = dict(marker.kwargs) if marker else {}
    with st.embedded_broker(settings) as b:
        yield b


@pytest.fixture
def samsa_cluster() -> Iterator[Callable[..., st.SamsaCluster]]:
    """samsa_cluster(n, **settings): ZooKeeper and n brokers (samsa_cluster(n, processes=P):
    n nodes of P processes), closed after the test; the test is skipped where ZooKeeper
    (Debian's zookeeper package) and java are not installed."""
    if not st.zookeeper_available():
        pytest.skip(f"ZooKeeper is not installed ({st.ZOOKEEPER_JAR}, java)")
    made: list[st.SamsaCluster] = []

    def start(brokers: int = 3, settings: dict[str, Any] | None = None, *,
              processes: int = 1, **kwargs: Any) -> st.SamsaCluster:
        c = st.SamsaCluster(brokers, st._settings(settings, kwargs), processes=processes)
        made.append(c)
        return c.start()

    try:
        yield start
    finally:
        for c in made:
            c.close()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "samsa_settings(**props): broker properties for the samsa_broker fixture")


def pytest_sessionstart(session: pytest.Session) -> None:
    st.warm_up()  # the brokers' launcher imports Samsa while pytest collects


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not st.startup_times:
        return
    times = sorted(t for _, t in st.startup_times)
    terminalreporter.write_line(
        f"samsa.testing: {len(times)} broker start(s), start-up median "
        f"{times[len(times) // 2]:.3f} s, min {times[0]:.3f} s, max {times[-1]:.3f} s"
        + (f" (and {st._zygote.waited:.3f} s once, waiting for the launcher's imports)"
           if st._zygote.waited else ""))
