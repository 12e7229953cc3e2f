"""Fuzz the request path in-process: random and mutated frames for every API the broker serves.

Whatever arrives, the dispatcher must answer (bytes or no response) or ask to close the
connection; any other exception would be a crash path reachable from a client.
"""

from __future__ import annotations

import asyncio
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from samsa.broker.app import Broker
from samsa.broker.network.server import ConnectionInfo
from samsa.broker.network.signals import CloseConnection
from samsa.config.loader import load_config

from .wire import WireClient


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    data = tmp_path_factory.mktemp("fuzz")
    config = load_config(None, {"log.dirs": str(data), "listeners": "PLAINTEXT://127.0.0.1:0"})
    loop = asyncio.new_event_loop()
    broker = Broker(config)
    broker.log_manager.startup(broker._config_for_topic_name)
    broker.replicas.load_all()
    dispatch = broker.dispatcher
    conn = ConnectionInfo("fuzz:0", None)  # type: ignore[arg-type]
    specs = [
        (s.key, v) for s in broker.registry.all() for v in range(s.min_version, s.max_version + 1)
    ]
    yield loop, dispatch, conn, specs
    broker.log_manager.shutdown()
    loop.close()


def _run(harness, frame: bytes) -> None:
    loop, dispatch, conn, _ = harness
    try:
        result = loop.run_until_complete(asyncio.wait_for(dispatch(frame, conn), 5))
    except CloseConnection:
        return
    # A response is the size prefix and the frame's buffers, in order.
    assert result is None or isinstance(result, list)
    if result:
        (size,) = struct.unpack(">i", result[0])
        assert size == sum(len(part) for part in result[1:])


def _header(api_key: int, version: int, flexible: bool) -> bytes:
    h = struct.pack(">hhih", api_key, version, 42, 4) + b"fuzz"
    return h + (b"\x00" if flexible else b"")


@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_random_bodies_never_crash(harness, data):
    _, _, _, specs = harness
    api_key, version = data.draw(st.sampled_from(specs))
    flexible = data.draw(st.booleans())
    body = data.draw(st.binary(max_size=256))
    _run(harness, _header(api_key, version, flexible) + body)


@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_mutated_valid_requests_never_crash(harness, data):
    _, _, _, specs = harness
    api_key, version = data.draw(st.sampled_from(specs))
    client = WireClient.__new__(WireClient)
    client._correlation = 0
    try:
        _, framed = client.encode_request(api_key, version, {})
    except Exception:  # kio cannot encode an all-defaults request of this version
        return
    frame = bytearray(framed[4:])
    for _ in range(data.draw(st.integers(1, 6))):
        if not frame:
            break
        pos = data.draw(st.integers(0, len(frame) - 1))
        frame[pos] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(8, max(8, len(frame))))
    _run(harness, bytes(frame[:cut]))


def test_broker_serves_after_fuzzing_socket(shared_broker):
    """Random frames over real sockets, then a normal request on a fresh connection."""
    import random

    rng = random.Random(1234)
    for _ in range(200):
        with WireClient(shared_broker.bootstrap, timeout=5) as c:
            body = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 64)))
            header = struct.pack(
                ">hhih", rng.choice([0, 1, 2, 3, 18, 19, 32]), rng.randint(0, 12), 1, 0
            )
            try:
                c.send_raw(struct.pack(">i", len(header) + len(body)) + header + body)
                c.is_closed(timeout=0.2)
            except OSError:
                pass
    with WireClient(shared_broker.bootstrap) as c:
        assert c.call(18, 0, {}).error_code == 0
