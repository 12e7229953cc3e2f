"""kafka-configs (kafka.admin.ConfigCommand, from Kafka's core jar kafka_2.13 4.x) against Samsa.

Topic overrides are added, described and deleted through the tool; broker configs are static in
Samsa, so describing them works and altering them is refused with Kafka's own error.
"""

from __future__ import annotations

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


def test_broker_config_alter_is_refused(shared_broker):
    bootstrap = shared_broker.bootstrap
    broker_id = str(shared_broker.broker_id)
    res = _configs(
        bootstrap,
        "--entity-type",
        "brokers",
        "--entity-name",
        broker_id,
        "--alter",
        "--add-config",
        "log.cleaner.threads=2",
    )
    # The broker's INVALID_REQUEST and its message, surfaced by the tool as Kafka prints them.
    assert not res.timed_out and res.returncode == 1, res.describe()
    assert "Error while executing config command" in res.stderr, res.describe()
    assert (
        "org.apache.kafka.common.errors.InvalidRequestException: "
        "Dynamic broker configs are not supported" in res.stderr
    ), res.describe()

    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ConfigResource.Type.BROKER, broker_id)
    entries = admin.describe_configs([resource])[resource].result(30)
    assert entries["log.cleaner.threads"].value == "1"
