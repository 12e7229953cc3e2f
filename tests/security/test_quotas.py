"""Client quotas: AlterClientQuotas/DescribeClientQuotas with Kafka's matching, and producers
and consumers held to producer_byte_rate / consumer_byte_rate by client id (PLAINTEXT) and by
SASL user, as Kafka throttles them (throttle_time in the response, the connection muted).

The broker measures rates over quota.window.num=2 samples of 1 s (Kafka's default is 11,
which lets a new client burst ten windows' worth before the first throttle: too long for a
short test; the arithmetic is the same)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from samsa.protocol.errors import ErrorCode
from tests.protocol.wire import WireClient
from tests.support.broker import BrokerProcess, free_port

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="admin" password="admin-secret" user_alice="alice-secret" '
        'user_bob="bob-secret";')
DESCRIBE, ALTER = 48, 49
EXACT, DEFAULT, SPECIFIED = 0, 1, 2


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    plain, client, sasl, metrics = free_port(), free_port(), free_port(), free_port()
    b = BrokerProcess(tmp_path_factory.mktemp("quotas") / "data", port=plain, name="quotas",
                      settings={
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},CLIENT://127.0.0.1:{client},"
                     f"SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "listener.security.protocol.map":
            "PLAINTEXT:PLAINTEXT,CLIENT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "quota.window.num": 2,
        "controller.quota.window.num": 1,  # a burst of one second's worth
        "metrics.port": metrics,
    })
    b.client_port, b.sasl_port = client, sasl  # type: ignore[attr-defined]
    b.metrics_port = metrics  # type: ignore[attr-defined]
    b.start()
    try:
        yield b
    finally:
        b.close()


def _client_bootstrap(b: BrokerProcess) -> str:
    return f"127.0.0.1:{b.client_port}"  # type: ignore[attr-defined]


def _entity(**names: str | None) -> list[dict[str, Any]]:
    return [{"entity_type": t.replace("_", "-"), "entity_name": n} for t, n in names.items()]


def _alter(b: BrokerProcess, entries: list[tuple[list[dict[str, Any]], dict[str, float | None]]],
           validate_only: bool = False) -> list[tuple[int, str | None]]:
    body = {"validate_only": validate_only, "entries": [
        {"entity": entity, "ops": [{"key": k, "value": 0.0 if v is None else v,
                                    "remove": v is None} for k, v in ops.items()]}
        for entity, ops in entries]}
    with WireClient(b.bootstrap) as w:
        resp = w.call(ALTER, 1, body)
    return [(int(e.error_code), e.error_message) for e in resp.entries]


def _describe(b: BrokerProcess, components: list[tuple[str, int, str | None]],
              strict: bool = False) -> Any:
    with WireClient(b.bootstrap) as w:
        return w.call(DESCRIBE, 1, {"strict": strict, "components": [
            {"entity_type": t, "match_type": m, "match": n} for t, m, n in components]})


def _entries(resp: Any) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
    assert resp.error_code == ErrorCode.none, resp.error_message
    return {tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity)):
            {v.key: v.value for v in entry.values} for entry in resp.entries}


def test_alter_and_describe_client_quotas(broker: BrokerProcess) -> None:
    ok = (ErrorCode.none, None)
    assert _alter(broker, [
        (_entity(user="ann"), {"producer_byte_rate": 1024.0}),
        (_entity(user=None), {"consumer_byte_rate": 2048.0}),
        (_entity(client_id="app"), {"request_percentage": 50.5}),
        (_entity(user="ann", client_id="app"), {"producer_byte_rate": 4096.0,
                                                "controller_mutation_rate": 2.5}),
    ]) == [ok] * 4
    ann, ann_app = (("user", "ann"),), (("client-id", "app"), ("user", "ann"))
    default_user, app = (("user", None),), (("client-id", "app"),)
    everything = _entries(_describe(broker, []))
    assert {k: everything[k] for k in (ann, ann_app, default_user, app)} == {
        ann: {"producer_byte_rate": 1024.0},
        ann_app: {"producer_byte_rate": 4096.0, "controller_mutation_rate": 2.5},
        default_user: {"consumer_byte_rate": 2048.0},
        app: {"request_percentage": 50.5},
    }
    assert set(_entries(_describe(broker, [("user", EXACT, "ann")]))) == {ann, ann_app}
    assert set(_entries(_describe(broker, [("user", EXACT, "ann")], strict=True))) == {ann}
    assert set(_entries(_describe(broker, [("user", DEFAULT, None)]))) == {default_user}
    assert set(_entries(_describe(broker, [("client-id", SPECIFIED, None)], strict=True))) \
        == {app}
    assert set(_entries(_describe(broker, [("user", SPECIFIED, None),
                                           ("client-id", EXACT, "app")]))) == {ann_app}

    # validation as Kafka's: nothing of a refused entry is written
    refused = _alter(broker, [
        (_entity(user="ann"), {"producer_byte_rate": 7.0, "no_such_quota": 1.0}),
        (_entity(user="bo"), {"consumer_byte_rate": -5.0}),
        (_entity(client_id="app"), {"producer_byte_rate": 1.5}),
        ([], {"producer_byte_rate": 1.0}),
        (_entity(client_id=""), {"producer_byte_rate": 1.0}),
    ])
    assert [code for code, _ in refused] == [ErrorCode.invalid_request] * 5, refused
    assert _alter(broker, [(_entity(user="ann"), {"producer_byte_rate": 9.0})],
                  validate_only=True) == [ok]
    assert _alter(broker, [(_entity(user="ann", client_id="app"),
                            {"controller_mutation_rate": None})]) == [ok]
    after = _entries(_describe(broker, [("user", EXACT, "ann")]))
    assert after == {ann: {"producer_byte_rate": 1024.0}, ann_app: {"producer_byte_rate": 4096.0}}

    bad = _describe(broker, [("user", EXACT, None)])
    assert bad.error_code == ErrorCode.invalid_request and bad.entries is None
    assert _describe(broker, [("group", SPECIFIED, None)]).error_code \
        == ErrorCode.unsupported_version
    # leave no quota behind for the other tests
    assert _alter(broker, [(_entity(**e), {k: None for k in ops}) for e, ops in [
        ({"user": "ann"}, ["producer_byte_rate"]), ({"user": None}, ["consumer_byte_rate"]),
        ({"client_id": "app"}, ["request_percentage"]),
        ({"user": "ann", "client_id": "app"}, ["producer_byte_rate"])]]) == [ok] * 4
    assert _entries(_describe(broker, [])) == {}


class _Throttles:
    """confluent-kafka's throttle_cb: the throttle times the broker answered with."""

    def __init__(self) -> None:
        self.times: list[float] = []

    def __call__(self, event: Any) -> None:
        self.times.append(event.throttle_time)  # seconds


def _producer(bootstrap: str, client_id: str, throttles: _Throttles,
              **extra: Any) -> Any:
    from confluent_kafka import Producer

    # small requests (batch.size) and a short queue: the quota is what limits the rate
    return Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "acks": 1,
                     "linger.ms": 5, "batch.size": 16384, "queue.buffering.max.kbytes": 64,
                     "throttle_cb": throttles, **extra})


def _produce_for(producer: Any, topic: str, seconds: float, value: bytes,
                 acked: list[tuple[float, int]]) -> None:
    """Produce as fast as the producer takes records, for `seconds`; `acked` gets (time,
    bytes) of each delivered record."""
    def delivered(err: Any, msg: Any) -> None:
        if err is None:
            acked.append((time.monotonic(), len(msg.value())))

    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            producer.produce(topic, value, on_delivery=delivered)
        except BufferError:
            producer.poll(0.05)
        producer.poll(0)
    producer.flush(30)


def test_producer_held_to_its_client_id_quota(broker: BrokerProcess) -> None:
    quota = 100_000.0
    assert _alter(broker, [(_entity(client_id="slow-producer"),
                            {"producer_byte_rate": quota})]) == [(ErrorCode.none, None)]
    topic = f"quota-{uuid.uuid4().hex[:8]}"
    bootstrap = _client_bootstrap(broker)
    slow_throttles, free_throttles = _Throttles(), _Throttles()
    slow = _producer(bootstrap, "slow-producer", slow_throttles)
    free = _producer(bootstrap, "free-producer", free_throttles)
    value = b"x" * 1000
    slow_acked: list[tuple[float, int]] = []
    free_acked: list[tuple[float, int]] = []
    started = time.monotonic()
    runner = threading.Thread(target=_produce_for, args=(slow, topic, 7.0, value, slow_acked))
    runner.start()
    _produce_for(free, topic, 1.0, value, free_acked)
    runner.join(60)
    assert slow_throttles.times and max(slow_throttles.times) > 0
    # Everything acknowledged over the run: the first window's worth goes at once (Kafka
    # assumes quota.window.num - 1 windows elapsed), the rest at the quota.
    span = slow_acked[-1][0] - started
    rate = sum(n for _, n in slow_acked) / span
    assert span > 6.0, span
    assert 0.8 * quota <= rate <= 1.2 * quota, (rate, quota)
    # a client without a quota is never throttled, and is not held to the other's rate
    assert free_throttles.times == []
    assert sum(n for _, n in free_acked) > 2 * quota * 1.2


def test_throttle_time_metric(broker: BrokerProcess) -> None:
    """kafka.server:type=Produce,user=,client-id=metered throttle-time on /metrics: the
    average throttle time of the client's throttled requests."""
    import urllib.request

    assert _alter(broker, [(_entity(client_id="metered"),
                            {"producer_byte_rate": 20_000.0})]) == [(ErrorCode.none, None)]
    throttles = _Throttles()
    _produce_for(_producer(_client_bootstrap(broker), "metered", throttles),
                 f"quota-{uuid.uuid4().hex[:8]}", 2.0, b"z" * 1000, [])
    port = broker.metrics_port  # type: ignore[attr-defined]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    line = 'kafka_server_produce_throttle_time{client_id="metered",user=""} '
    (value,) = [float(x[len(line):]) for x in text.splitlines() if x.startswith(line)]
    most_ms = max(throttles.times) * 1000  # (librdkafka reports seconds)
    assert throttles.times and 0 < value <= most_ms + 1, (value, throttles.times)


def test_consumer_held_to_its_client_id_quota(broker: BrokerProcess) -> None:
    from confluent_kafka import Consumer

    quota = 100_000.0
    assert _alter(broker, [(_entity(client_id="slow-consumer"),
                            {"consumer_byte_rate": quota})]) == [(ErrorCode.none, None)]
    topic = f"quota-{uuid.uuid4().hex[:8]}"
    bootstrap = _client_bootstrap(broker)
    producer = _producer(bootstrap, "loader", _Throttles(),
                         **{"queue.buffering.max.kbytes": 1024})
    for i in range(300):
        producer.produce(topic, f"{i:04d}".encode() + b"y" * 996)
    assert producer.flush(30) == 0
    throttles = _Throttles()
    consumer = Consumer({"bootstrap.servers": bootstrap, "client.id": "slow-consumer",
                         "group.id": f"g-{topic}", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "throttle_cb": throttles})
    consumer.subscribe([topic])
    got: set[bytes] = set()
    deadline = time.monotonic() + 30
    try:
        while len(got) < 300 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.add(msg.value()[:4])
    finally:
        consumer.close()
    assert len(got) == 300  # throttled, not stalled
    assert throttles.times and max(throttles.times) > 0


def test_user_quota_over_sasl(broker: BrokerProcess) -> None:
    assert _alter(broker, [(_entity(user="alice"), {"producer_byte_rate": 20_000.0})]) \
        == [(ErrorCode.none, None)]
    topic = f"quota-{uuid.uuid4().hex[:8]}"
    bootstrap = f"127.0.0.1:{broker.sasl_port}"  # type: ignore[attr-defined]
    throttled: dict[str, _Throttles] = {}
    for user in ("alice", "bob"):
        throttled[user] = _Throttles()
        p = _producer(bootstrap, "same-client-id", throttled[user],
                      **{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                         "sasl.username": user, "sasl.password": f"{user}-secret"})
        _produce_for(p, topic, 1.5, b"z" * 1000, [])
    assert throttled["alice"].times and max(throttled["alice"].times) > 0
    assert throttled["bob"].times == []


def test_inter_broker_listener_is_exempt(broker: BrokerProcess) -> None:
    """The PLAINTEXT listener is the inter-broker one (the clients have CLIENT): no quota
    holds a request there, while the same client id on CLIENT is throttled."""
    assert _alter(broker, [(_entity(client_id="wire-test"), {"producer_byte_rate": 1000.0})]) \
        == [(ErrorCode.none, None)]
    topic = f"quota-{uuid.uuid4().hex[:8]}"
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(20)
    records = _record_batch(b"v" * 3000)
    produce = {"transactional_id": None, "acks": 1, "timeout": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": records}]}]}
    throttle_times = {}
    for name, bootstrap in (("inter-broker", broker.bootstrap),
                            ("client", _client_bootstrap(broker))):
        with WireClient(bootstrap) as w:
            answers = [w.call(0, 9, produce) for _ in range(3)]
        assert all(a.responses[0].partition_responses[0].error_code == 0 for a in answers)
        throttle_times[name] = [a.throttle_time.total_seconds() for a in answers]
    assert throttle_times["inter-broker"] == [0, 0, 0]
    assert throttle_times["client"][-1] > 0, throttle_times


def test_request_percentage_throttles_within_one_window(broker: BrokerProcess) -> None:
    """request_percentage counts the time spent on the client's requests; its throttle time
    is capped at one window (quota.window.size.seconds), as Kafka caps it."""
    assert _alter(broker, [(_entity(client_id="busy"), {"request_percentage": 0.001})]) \
        == [(ErrorCode.none, None)]
    times: list[float] = []
    with WireClient(_client_bootstrap(broker), client_id=b"busy") as w:
        while len(times) < 200 and not any(times):  # until over the quota (a few calls)
            answer = w.call(3, 12, {"topics": None, "allow_auto_topic_creation": False,
                                    "include_topic_authorized_operations": False})
            times.append(answer.throttle_time.total_seconds())
        times += [w.call(3, 12, {"topics": None, "allow_auto_topic_creation": False,
                                 "include_topic_authorized_operations": False}
                         ).throttle_time.total_seconds() for _ in range(2)]
    assert max(times) > 0 and all(t <= 1.0 for t in times), times


def _record_batch(value: bytes) -> bytes:
    from samsa.protocol.records import build_batch

    return build_batch([(None, value)], default_timestamp=int(time.time() * 1000))


@pytest.mark.timeout(300)
def test_kafka_configs_sets_and_describes_quotas(broker: BrokerProcess) -> None:
    """Kafka's own kafka-configs (ConfigCommand) over AlterClientQuotas/DescribeClientQuotas."""
    from tests.support.java import run_java_tool

    def configs(*args: str) -> str:
        res = run_java_tool("kafka.admin.ConfigCommand",
                            ["--bootstrap-server", broker.bootstrap, *args])
        assert res.returncode == 0, res.describe()
        return res.stdout

    out = configs("--alter", "--entity-type", "users", "--entity-name", "erin",
                  "--entity-type", "clients", "--entity-name", "cli-app",
                  "--add-config", "producer_byte_rate=2048,consumer_byte_rate=4096")
    assert "Completed updating config for user erin" in out, out
    out = configs("--alter", "--entity-type", "clients", "--entity-default",
                  "--add-config", "request_percentage=200")
    out = configs("--describe", "--entity-type", "users", "--entity-name", "erin",
                  "--entity-type", "clients", "--entity-name", "cli-app")
    assert "consumer_byte_rate=4096.0" in out and "producer_byte_rate=2048.0" in out, out
    out = configs("--describe", "--entity-type", "clients", "--entity-default")
    assert "request_percentage=200.0" in out, out
    configs("--alter", "--entity-type", "clients", "--entity-default",
            "--delete-config", "request_percentage")
    out = configs("--describe", "--entity-type", "clients", "--entity-default")
    assert "request_percentage" not in out, out


def _create(w: WireClient, version: int, topics: dict[str, int]) -> Any:
    return w.call(19, version, {"timeout": 10000, "topics": [
        {"name": n, "num_partitions": p, "replication_factor": 1} for n, p in topics.items()]})


def test_controller_mutation_rate(broker: BrokerProcess) -> None:
    """controller_mutation_rate, partitions per second (Kafka's token bucket, a burst of one
    window here): CreateTopics v6+, CreatePartitions v3+ and DeleteTopics v5+ refuse a topic with
    THROTTLING_QUOTA_EXCEEDED while the quota is exceeded; older versions mutate and are
    throttled. Either way the response's throttle time is how long until the quota is back
    under, and the connection is muted that long."""
    throttled = ErrorCode.throttling_quota_exceeded
    assert _alter(broker, [(_entity(client_id=c), {"controller_mutation_rate": 2.0})
                           for c in ("mutator", "old-mutator")]) == [(ErrorCode.none, None)] * 2
    tag = uuid.uuid4().hex[:6]
    a, b, c = (f"mut-{tag}-{x}" for x in "abc")
    with WireClient(_client_bootstrap(broker), client_id=b"mutator") as w:
        resp = _create(w, 7, {a: 1, b: 2, c: 1})  # 2 credits: a (1 left), b (-1 left), c refused
        assert [(t.name, t.error_code) for t in resp.topics] == [(a, 0), (b, 0), (c, throttled)]
        assert resp.topics[2].error_message == "The throttling quota has been exceeded."
        throttle = resp.throttle_time.total_seconds()
        assert 0.35 <= throttle <= 0.5, throttle  # 1 credit under at 2 per second
        started = time.monotonic()  # the connection is muted for the throttle time
        resp = w.call(37, 3, {"timeout": 10000, "topics": [{"name": a, "count": 3}]})
        assert time.monotonic() - started >= throttle * 0.8
        assert [r.error_code for r in resp.results] == [0]  # back under: allowed, -1 left
        resp = w.call(20, 5, {"timeout": 10000, "topic_names": [b]})
        assert [r.error_code for r in resp.responses] == [throttled]
        assert resp.throttle_time.total_seconds() > 0
    with WireClient(_client_bootstrap(broker), client_id=b"old-mutator") as w:
        resp = _create(w, 5, {f"mut-{tag}-old": 4})  # permissive: done, 2 credits under
        assert [t.error_code for t in resp.topics] == [0]
        assert 0.8 <= resp.throttle_time.total_seconds() <= 1.0
    # librdkafka (CreateTopics v4: permissive): created, its throttle_cb told the throttle
    from confluent_kafka.admin import AdminClient, NewTopic

    assert _alter(broker, [(_entity(client_id="rdkafka-mutator"),
                            {"controller_mutation_rate": 2.0})]) == [(ErrorCode.none, None)]
    throttles = _Throttles()
    admin = AdminClient({"bootstrap.servers": _client_bootstrap(broker),
                         "client.id": "rdkafka-mutator", "throttle_cb": throttles})
    (f,) = admin.create_topics([NewTopic(f"mut-{tag}-rd", 6, 1)]).values()
    f.result(20)
    deadline = time.monotonic() + 5
    while not throttles.times and time.monotonic() < deadline:
        admin.poll(0.1)
    assert throttles.times and 1.5 <= max(throttles.times) <= 2.0, throttles.times
    with WireClient(_client_bootstrap(broker), client_id=b"free") as w:  # no quota
        resp = _create(w, 7, {f"mut-{tag}-free": 8})
        assert [t.error_code for t in resp.topics] == [0] and resp.throttle_time.seconds == 0
