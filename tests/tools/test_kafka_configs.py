"""kafka-configs (kafka.admin.ConfigCommand, from Kafka's core jar kafka_2.13 4.x) against Samsa.

Topic overrides are added, described and deleted through the tool; dynamic broker configs (per
broker and cluster default) are added, described with their sources, applied and deleted.
"""

from __future__ import annotations

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic

from tests.support.java import JavaResult, run_java_tool

CONFIG_COMMAND = "kafka.admin.ConfigCommand"


def _configs(bootstrap: str, *args: str) -> JavaResult:
    return run_java_tool(CONFIG_COMMAND, ["--bootstrap-server", bootstrap, *args])


def _listed(res: JavaResult, header: str) -> dict[str, str]:
    """The `name=value sensitive=... synonyms=...` lines under `header`, as name -> value."""
    lines = res.stdout.splitlines()
    assert header in lines, res.describe()
    out: dict[str, str] = {}
    for line in lines[lines.index(header) + 1 :]:
        if not line.startswith("  "):
            break
        name, _, rest = line.strip().partition("=")
        out[name] = rest.split(" sensitive=", 1)[0]
    return out


def _create_topic(bootstrap: str, topic: str) -> AdminClient:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        fut.result(30)
    return admin


def test_topic_config_add_describe_delete(shared_broker, unique_topic):
    bootstrap = shared_broker.bootstrap
    admin = _create_topic(bootstrap, unique_topic)
    entity = ["--entity-type", "topics", "--entity-name", unique_topic]
    header = f"Dynamic configs for topic {unique_topic} are:"

    res = _configs(
        bootstrap, *entity, "--alter", "--add-config", "retention.ms=12345,cleanup.policy=compact"
    ).check()
    assert f"Completed updating config for topic {unique_topic}." in res.stdout

    # The broker really holds them (seen by another client), as topic overrides.
    resource = ConfigResource(ConfigResource.Type.TOPIC, unique_topic)
    entries = admin.describe_configs([resource])[resource].result(30)
    for name, value in (("retention.ms", "12345"), ("cleanup.policy", "compact")):
        assert entries[name].value == value
        assert entries[name].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value

    res = _configs(bootstrap, *entity, "--describe").check()
    assert _listed(res, header) == {"retention.ms": "12345", "cleanup.policy": "compact"}

    res = _configs(bootstrap, *entity, "--alter", "--delete-config", "retention.ms").check()
    assert f"Completed updating config for topic {unique_topic}." in res.stdout
    res = _configs(bootstrap, *entity, "--describe").check()
    assert _listed(res, header) == {"cleanup.policy": "compact"}

    # Back to the broker default (log.retention.hours=168).
    entries = admin.describe_configs([resource])[resource].result(30)
    assert entries["retention.ms"].value == str(168 * 3_600_000)
    assert entries["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value


def test_broker_configs_describe(shared_broker):
    bootstrap = shared_broker.bootstrap
    broker_id = str(shared_broker.broker_id)
    entity = ["--entity-type", "brokers", "--entity-name", broker_id]

    # No dynamic broker configs in Samsa: the tool lists none.
    res = _configs(bootstrap, *entity, "--describe").check()
    assert _listed(res, f"Dynamic configs for broker {broker_id} are:") == {}

    res = _configs(bootstrap, *entity, "--describe", "--all").check()
    configs = _listed(res, f"All configs for broker {broker_id} are:")
    assert configs["broker.id"] == broker_id
    assert configs["log.dirs"] == str(shared_broker.data_dir)
    assert configs["listeners"] == f"PLAINTEXT://{bootstrap}"
    assert configs["log.cleaner.threads"] == "1"
    assert len(configs) > 50


def _produce(bootstrap: str, topic: str, size: int) -> str | None:
    """One record of `size` bytes; the error name, None once acknowledged."""
    errors: list[str | None] = []
    p = Producer({"bootstrap.servers": bootstrap, "message.send.max.retries": 0})
    p.produce(topic, b"x" * size,
              on_delivery=lambda err, _msg: errors.append(None if err is None else err.name()))
    p.flush(30)
    return errors[0]


def _broker_entries(admin: AdminClient, name: str) -> dict[str, tuple[str | None, int]]:
    resource = ConfigResource(ConfigResource.Type.BROKER, name)
    entries = admin.describe_configs([resource])[resource].result(30)
    return {k: (e.value, e.source) for k, e in entries.items()}


def test_broker_dynamic_configs(broker, unique_topic):
    """kafka-configs on a single broker: per-broker and cluster-default dynamic configs are
    stored in the metadata file, described with their sources, take effect at once for
    topics without an override (message.max.bytes) and survive a restart; a property Kafka
    cannot change while running is refused, a bad value too."""
    bootstrap, broker_id = broker.bootstrap, str(broker.broker_id)
    admin = _create_topic(bootstrap, unique_topic)
    entity = ["--entity-type", "brokers", "--entity-name", broker_id]
    default = ["--entity-type", "brokers", "--entity-default"]
    assert _produce(bootstrap, unique_topic, 5000) is None

    res = _configs(bootstrap, *entity, "--alter", "--add-config",
                   "message.max.bytes=2000,log.retention.ms=3600000").check()
    assert f"Completed updating config for broker {broker_id}." in res.stdout
    res = _configs(bootstrap, *default, "--alter", "--add-config",
                   "log.segment.bytes=2097152,log.retention.ms=60000").check()
    assert "Completed updating default config for brokers in the cluster." in res.stdout
    assert _produce(bootstrap, unique_topic, 5000) == "MSG_SIZE_TOO_LARGE"

    refused = _configs(bootstrap, *entity, "--alter", "--add-config", "log.dirs=/elsewhere")
    assert refused.returncode == 1, refused.describe()
    assert ("InvalidRequestException: Cannot update these configs dynamically: "
            "Set(log.dirs)") in refused.stderr, refused.describe()
    bad = _configs(bootstrap, *entity, "--alter", "--add-config", "log.retention.ms=soon")
    assert "InvalidConfigurationException" in bad.stderr, bad.describe()

    for restarted in (False, True):
        res = _configs(bootstrap, *entity, "--describe").check()
        assert _listed(res, f"Dynamic configs for broker {broker_id} are:") == {
            "message.max.bytes": "2000", "log.retention.ms": "3600000"}
        assert ("log.retention.ms=3600000 sensitive=false synonyms={"
                "DYNAMIC_BROKER_CONFIG:log.retention.ms=3600000, "
                "DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=60000, "
                "DEFAULT_CONFIG:log.retention.hours=168}") in res.stdout, res.stdout
        res = _configs(bootstrap, *default, "--describe").check()
        assert _listed(res, "Default configs for brokers in the cluster are:") == {
            "log.segment.bytes": "2097152", "log.retention.ms": "60000"}
        entries = _broker_entries(admin, broker_id)
        assert entries["message.max.bytes"] == ("2000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
        assert entries["log.segment.bytes"] == (
            "2097152", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
        assert entries["node.id"] == (broker_id, ConfigSource.STATIC_BROKER_CONFIG.value)
        assert entries["num.partitions"] == ("1", ConfigSource.DEFAULT_CONFIG.value)
        topic = ConfigResource(ConfigResource.Type.TOPIC, unique_topic)
        topic_entries = admin.describe_configs([topic])[topic].result(30)
        assert topic_entries["max.message.bytes"].value == "2000"
        assert topic_entries["retention.ms"].source == (
            ConfigSource.DYNAMIC_BROKER_CONFIG.value)
        assert _produce(bootstrap, unique_topic, 5000) == "MSG_SIZE_TOO_LARGE"
        if not restarted:
            broker.stop()
            broker.start()
            admin = AdminClient({"bootstrap.servers": bootstrap})

    _configs(bootstrap, *entity, "--alter", "--delete-config", "message.max.bytes").check()
    assert _produce(bootstrap, unique_topic, 5000) is None
