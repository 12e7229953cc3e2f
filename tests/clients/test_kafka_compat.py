"""Behaviour found to differ from Apache Kafka by client libraries' own test suites.

- OffsetCommit / TxnOffsetCommit to a topic or partition that does not exist: each such
  partition is answered UNKNOWN_TOPIC_OR_PARTITION and nothing is committed (KafkaApis)
- Produce v8+ names the records a batch was refused for in `record_errors` (KIP-467) with
  INVALID_RECORD / INVALID_TIMESTAMP and an `error_message`; nothing of the batch is appended
- Topic configs Kafka 4.x refuses (e.g. segment.bytes under 1 MiB) get INVALID_CONFIG on
  CreateTopics (validate_only too), AlterConfigs and IncrementalAlterConfigs; Kafka's
  internal.segment.bytes sets a smaller segment size
- Group configs (resource type GROUP, Kafka 4): described with their defaults and sources,
  altered within the broker's group.consumer.* bounds, stored across a restart, and
  kafka-configs --entity-type groups works
"""

from __future__ import annotations

import time

import pytest

from samsa.config.schema.kafka_table import kafka_properties
from samsa.protocol.records import build_batch
from tests.protocol.wire import WireClient

from .pyclients import OP_TIMEOUT, create_topic, unique_name

pytestmark = pytest.mark.timeout(120)

PRODUCE, LIST_OFFSETS, CREATE_TOPICS, DESCRIBE_CONFIGS, ALTER_CONFIGS = 0, 2, 19, 32, 33
INCREMENTAL_ALTER_CONFIGS = 44
TOPIC_RESOURCE, GROUP_RESOURCE = 2, 32
INVALID_REQUEST = 42
STATIC_BROKER_CONFIG, DEFAULT_CONFIG, GROUP_CONFIG = 4, 5, 8
SET, DELETE = 0, 1
OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR, TXN_OFFSET_COMMIT = 8, 9, 10, 28
UNKNOWN_TOPIC_OR_PARTITION, INVALID_TIMESTAMP, INVALID_CONFIG, INVALID_RECORD = 3, 32, 40, 87


def _coordinator_ready(c: WireClient, group: str) -> None:
    """FindCoordinator until the group's coordinator is loaded (the one broker)."""
    deadline = time.monotonic() + OP_TIMEOUT
    while True:
        resp = c.call(FIND_COORDINATOR, 3, {"key": group, "key_type": 0})
        if resp.error_code == 0 or time.monotonic() > deadline:
            assert resp.error_code == 0, resp
            return
        time.sleep(0.1)


def _errors(resp) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.error_code
            for t in resp.topics for p in t.partitions}


def test_offset_commit_to_missing_topic_or_partition(shared_broker):
    topic, missing = unique_name("compat-oc"), unique_name("compat-missing")
    group = unique_name("compat-oc-group")
    create_topic("confluent-kafka", shared_broker.bootstrap, topic, 1)
    with WireClient(shared_broker.bootstrap) as c:
        _coordinator_ready(c, group)
        resp = c.call(OFFSET_COMMIT, 8, {
            "group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
            "group_instance_id": None,
            "topics": [
                {"name": topic, "partitions": [
                    {"partition_index": i, "committed_offset": 5,
                     "committed_leader_epoch": -1, "committed_metadata": ""}
                    for i in (0, 7)]},
                {"name": missing, "partitions": [
                    {"partition_index": 0, "committed_offset": 5,
                     "committed_leader_epoch": -1, "committed_metadata": ""}]},
            ]})
        assert _errors(resp) == {(topic, 0): 0, (topic, 7): UNKNOWN_TOPIC_OR_PARTITION,
                                 (missing, 0): UNKNOWN_TOPIC_OR_PARTITION}
        fetched = c.call(OFFSET_FETCH, 7, {"group_id": group, "topics": None,
                                          "require_stable": False})
    committed = {(t.name, p.partition_index): p.committed_offset
                 for t in fetched.topics for p in t.partitions}
    assert committed == {(topic, 0): 5}


def test_txn_offset_commit_to_missing_topic(shared_broker):
    missing = unique_name("compat-missing")
    with WireClient(shared_broker.bootstrap) as c:
        resp = c.call(TXN_OFFSET_COMMIT, 3, {
            "transactional_id": unique_name("compat-txn"), "group_id": unique_name("g"),
            "producer_id": 0, "producer_epoch": 0, "generation_id": -1, "member_id": "",
            "group_instance_id": None,
            "topics": [{"name": missing, "partitions": [
                {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                 "committed_metadata": ""}]}]})
    assert _errors(resp) == {(missing, 0): UNKNOWN_TOPIC_OR_PARTITION}


def test_admin_alter_group_offsets_of_missing_topic(shared_broker):
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap})
    group, missing = unique_name("compat-alter"), unique_name("compat-missing")
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(missing, 0, 3)])
    (future,) = admin.alter_consumer_group_offsets([request]).values()
    with pytest.raises(Exception) as info:
        result = future.result(timeout=OP_TIMEOUT)
        errors = [tp.error for tp in result.topic_partitions if tp.error is not None]
        raise RuntimeError(errors) if errors else AssertionError("no error reported")
    text = str(info.value)
    assert "UNKNOWN_TOPIC_OR_PART" in text or str(KafkaError.UNKNOWN_TOPIC_OR_PART) in text, text


# --------------------------------------------------------------------------- Produce KIP-467
def _create_with_config(bootstrap: str, topic: str, config: dict[str, str]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    (future,) = admin.create_topics([NewTopic(topic, 1, 1, config=config)]).values()
    future.result(timeout=OP_TIMEOUT)


def _produce(c: WireClient, topic: str, batch: bytes, version: int = 9):
    resp = c.call(PRODUCE, version, {
        "transactional_id": None, "acks": -1, "timeout": 10_000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
    return resp.responses[0].partition_responses[0]


def _log_end(c: WireClient, topic: str) -> int:
    resp = c.call(LIST_OFFSETS, 5, {
        "replica_id": -1, "isolation_level": 0,
        "topics": [{"name": topic, "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]})
    return resp.topics[0].partitions[0].offset


def test_produce_keyless_records_to_compacted_topic_names_them(shared_broker):
    topic = unique_name("compat-compacted")
    _create_with_config(shared_broker.bootstrap, topic, {"cleanup.policy": "compact"})
    now = int(time.time() * 1000)
    batch = build_batch([(b"k0", b"v", None, now), (None, b"v", None, now),
                         (b"k2", b"v", None, now), (None, b"v", None, now)])
    with WireClient(shared_broker.bootstrap) as c:
        p = _produce(c, topic, batch)
        assert p.error_code == INVALID_RECORD
        assert [e.batch_index for e in p.record_errors] == [1, 3]
        for e in p.record_errors:
            assert e.batch_index_error_message == (
                f"Compacted topic cannot accept message without key in topic partition {topic}-0")
        assert p.error_message.startswith(
            "One or more records have been rejected due to 2 record errors in total")
        assert p.base_offset == -1
        # before v8 the response has no record errors: the code alone
        assert _produce(c, topic, batch, version=7).error_code == INVALID_RECORD
        assert _log_end(c, topic) == 0  # nothing of the batch was appended
        assert _produce(c, topic, build_batch([(b"k", b"v", None, now)])).error_code == 0
        assert _log_end(c, topic) == 1


def test_produce_out_of_bounds_timestamps_name_the_records(shared_broker):
    topic = unique_name("compat-ts")
    _create_with_config(shared_broker.bootstrap, topic,
                        {"message.timestamp.before.max.ms": "60000"})
    now = int(time.time() * 1000)
    old = now - 3_600_000
    batch = build_batch([(b"a", b"v", None, now), (b"b", b"v", None, old),
                         (b"c", b"v", None, now), (b"d", b"v", None, old)])
    with WireClient(shared_broker.bootstrap) as c:
        p = _produce(c, topic, batch)
        assert p.error_code == INVALID_TIMESTAMP
        assert [e.batch_index for e in p.record_errors] == [1, 3]
        assert p.record_errors[0].batch_index_error_message.startswith(
            f"Timestamp {old} of message with offset 1 is out of range.")
        assert p.error_message == "One or more records have been rejected due to invalid timestamp"
        assert _log_end(c, topic) == 0


# --------------------------------------------------------------------------- topic configs
REFUSED = [
    ("segment.bytes", "1048575"),  # Kafka 4.x: at least 1 MiB
    ("segment.bytes", "2048"),
    ("segment.ms", "0"),
    ("min.insync.replicas", "0"),
    ("cleanup.policy", "compact,remove"),
    ("compression.type", "brotli"),
    ("max.message.bytes", "-1"),
    ("retention.ms", "-2"),
    ("message.timestamp.type", "NoTime"),
    ("segment.index.bytes", "3"),
]


def _create_topic_error(c: WireClient, topic: str, configs: dict[str, str],
                        validate_only: bool) -> int:
    resp = c.call(CREATE_TOPICS, 5, {
        "topics": [{"name": topic, "num_partitions": 1, "replication_factor": 1,
                    "assignments": [],
                    "configs": [{"name": k, "value": v} for k, v in configs.items()]}],
        "timeout_ms": 10_000, "validate_only": validate_only})
    return resp.topics[0].error_code


def _alter_errors(c: WireClient, topic: str, key: str, value: str) -> tuple[int, int]:
    legacy = c.call(ALTER_CONFIGS, 1, {"validate_only": False, "resources": [
        {"resource_type": TOPIC_RESOURCE, "resource_name": topic,
         "configs": [{"name": key, "value": value}]}]})
    incremental = c.call(INCREMENTAL_ALTER_CONFIGS, 1, {"validate_only": False, "resources": [
        {"resource_type": TOPIC_RESOURCE, "resource_name": topic,
         "configs": [{"name": key, "config_operation": 0, "value": value}]}]})
    return legacy.responses[0].error_code, incremental.responses[0].error_code


def _described(c: WireClient, topic: str) -> dict[str, str | None]:
    resp = c.call(DESCRIBE_CONFIGS, 4, {"resources": [
        {"resource_type": TOPIC_RESOURCE, "resource_name": topic, "configuration_keys": None}],
        "include_synonyms": False, "include_documentation": False})
    return {e.name: e.value for e in resp.results[0].configs}


def test_topic_configs_kafka_refuses_get_invalid_config(shared_broker):
    topic = unique_name("compat-cfg")
    with WireClient(shared_broker.bootstrap) as c:
        assert _create_topic_error(c, topic, {}, False) == 0
        for key, value in REFUSED:
            for validate_only in (True, False):
                got = _create_topic_error(c, unique_name("compat-cfg"), {key: value},
                                          validate_only)
                assert got == INVALID_CONFIG, (key, value, validate_only)
            assert _alter_errors(c, topic, key, value) == (INVALID_CONFIG, INVALID_CONFIG), key
        described = _described(c, topic)
    assert described["segment.bytes"] == "1073741824"  # nothing was changed
    assert "internal.segment.bytes" not in described


def test_internal_segment_bytes_sets_small_segments(shared_broker):
    topic = unique_name("compat-small-seg")
    with WireClient(shared_broker.bootstrap) as c:
        assert _create_topic_error(c, topic, {"internal.segment.bytes": "1024"}, False) == 0
        described = _described(c, topic)
        assert described["internal.segment.bytes"] == "1024"
        assert described["segment.bytes"] == "1073741824"
        now = int(time.time() * 1000)
        for i in range(6):
            p = _produce(c, topic, build_batch([(b"k", b"v" * 300, None, now)] * 2))
            assert (p.error_code, p.base_offset) == (0, 2 * i)
    log_dir = shared_broker.data_dir / f"{topic}-0"
    assert len(list(log_dir.glob("*.log"))) >= 3  # rolled at 1024 bytes, not 1 GiB


# --------------------------------------------------------------------------- group configs
def _group_entries(c: WireClient, group: str):
    resp = c.call(DESCRIBE_CONFIGS, 4, {"resources": [
        {"resource_type": GROUP_RESOURCE, "resource_name": group, "configuration_keys": None}],
        "include_synonyms": True, "include_documentation": False})
    result = resp.results[0]
    return result.error_code, {e.name: (e.value, e.config_source) for e in result.configs}


def _alter_group(c: WireClient, group: str, op: int, key: str, value: str | None):
    resp = c.call(INCREMENTAL_ALTER_CONFIGS, 1, {"validate_only": False, "resources": [
        {"resource_type": GROUP_RESOURCE, "resource_name": group,
         "configs": [{"name": key, "config_operation": op, "value": value}]}]})
    return resp.responses[0].error_code, resp.responses[0].error_message


def test_group_configs_describe_alter_and_bounds(broker_factory):
    b = broker_factory(settings={"group.consumer.session.timeout.ms": 50000,
                                 "group.consumer.max.session.timeout.ms": 90000})
    group = unique_name("compat-group")
    with WireClient(b.bootstrap) as c:
        code, entries = _group_entries(c, group)  # a group need not exist to be described
        assert code == 0
        # Kafka 4.4's other (non-internal) group configs at Kafka's defaults
        others = {n: (k.default, DEFAULT_CONFIG) for n, k in kafka_properties("group").items()
                  if not k.internal}
        assert entries == {**others,
                           "consumer.session.timeout.ms": ("50000", STATIC_BROKER_CONFIG),
                           "consumer.heartbeat.interval.ms": ("5000", DEFAULT_CONFIG),
                           "consumer.assignment.interval.ms": ("1000", DEFAULT_CONFIG),
                           "share.auto.offset.reset": ("latest", DEFAULT_CONFIG),
                           "share.isolation.level": ("read_uncommitted", DEFAULT_CONFIG)}
        assert _alter_group(c, group, SET, "consumer.session.timeout.ms", "80000") == (0, None)
        refused = [
            ("consumer.session.timeout.ms", "95000",
             "consumer.session.timeout.ms must be less than or equal to "
             "group.consumer.max.session.timeout.ms"),
            ("consumer.heartbeat.interval.ms", "4000",
             "consumer.heartbeat.interval.ms must be greater than or equal to "
             "group.consumer.min.heartbeat.interval.ms"),
            ("consumer.heartbeat.interval.ms", "0", None),
            ("consumer.session.timeout.ms", "soon", None),
            ("consumer.rebalance.timeout.ms", "1000",
             "Unknown group config name: consumer.rebalance.timeout.ms"),
        ]
        for key, value, message in refused:
            code, got = _alter_group(c, group, SET, key, value)
            assert code == INVALID_CONFIG, (key, value)
            assert message is None or got == message, got
        assert _alter_group(c, "", SET, "consumer.session.timeout.ms", "80000")[0] == (
            INVALID_REQUEST)
        assert _group_entries(c, "")[0] == INVALID_REQUEST
    b.restart()
    with WireClient(b.bootstrap) as c:
        entries = _group_entries(c, group)[1]
        assert entries["consumer.session.timeout.ms"] == ("80000", GROUP_CONFIG)
        assert _alter_group(c, group, DELETE, "consumer.session.timeout.ms", None) == (0, None)
        entries = _group_entries(c, group)[1]
        assert entries["consumer.session.timeout.ms"] == ("50000", STATIC_BROKER_CONFIG)


def test_kafka_configs_tool_for_groups(shared_broker):
    from tests.support.java import run_java_tool

    group = unique_name("compat-tool-group")
    base = ["--bootstrap-server", shared_broker.bootstrap, "--entity-type", "groups",
            "--entity-name", group]
    res = run_java_tool("kafka.admin.ConfigCommand", [
        *base, "--alter", "--add-config", "consumer.heartbeat.interval.ms=6000"]).check()
    assert f"Completed updating config for group {group}." in res.stdout, res.describe()
    res = run_java_tool("kafka.admin.ConfigCommand", [*base, "--describe"]).check()
    lines = res.stdout.splitlines()
    assert f"Dynamic configs for group {group} are:" in lines, res.describe()
    assert any(line.strip().startswith("consumer.heartbeat.interval.ms=6000 ")
               for line in lines), res.describe()
    with WireClient(shared_broker.bootstrap) as c:
        entries = _group_entries(c, group)[1]
    assert entries["consumer.heartbeat.interval.ms"] == ("6000", GROUP_CONFIG)
