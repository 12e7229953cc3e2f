"""Dynamic broker configs on a three-broker ZooKeeper cluster: kafka-configs writes them where
Kafka's ZooKeeper-era brokers kept them (/config/brokers/<id>, /config/brokers/<default>, with a
/config/changes notification), every broker follows the default and its own entity at once and
after a restart."""

from __future__ import annotations

import json
import time

from confluent_kafka import Producer
from confluent_kafka.admin import ConfigResource, ConfigSource, NewTopic
from kazoo.client import KazooClient

from tests.cluster.cluster import Cluster, wait_until
from tests.support.java import JavaResult, run_java_tool

DYNAMIC = ConfigSource.DYNAMIC_BROKER_CONFIG.value
DEFAULT = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value


def _configs(cluster: Cluster, *args: str) -> JavaResult:
    return run_java_tool("kafka.admin.ConfigCommand",
                         ["--bootstrap-server", cluster.bootstrap, "--entity-type", "brokers",
                          *args]).check()


def _broker_config(cluster: Cluster, broker_id: int, name: str) -> tuple[str | None, int]:
    """(value, source) of `name` as broker `broker_id` itself describes it."""
    admin = cluster.admin()  # must outlive its futures
    resource = ConfigResource(ConfigResource.Type.BROKER, str(broker_id))
    entries = admin.describe_configs([resource])[resource].result(30)
    return entries[name].value, entries[name].source


def _produce(cluster: Cluster, topic: str, size: int) -> str | None:
    errors: list[str | None] = []
    p = Producer({"bootstrap.servers": cluster.bootstrap, "message.send.max.retries": 0})
    p.produce(topic, b"x" * size,
              on_delivery=lambda err, _msg: errors.append(None if err is None else err.name()))
    p.flush(30)
    return errors[0]


def test_default_and_per_broker_configs(cluster: Cluster) -> None:
    admin = cluster.admin()  # must outlive its futures
    admin.create_topics([NewTopic("big", 1, replica_assignment=[[2, 0]])])["big"].result(30)
    wait_until(lambda: cluster.has_leaders("big", 1), 20, "a leader")
    assert _produce(cluster, "big", 5000) is None

    _configs(cluster, "--entity-default", "--alter", "--add-config", "message.max.bytes=2000")
    _configs(cluster, "--entity-name", "1", "--alter", "--add-config",
             "log.retention.ms=3600000,follower.replication.throttled.rate=1000000")
    zk = KazooClient(hosts=cluster.brokers[0].settings["zookeeper.connect"])
    zk.start(10)
    try:
        assert json.loads(zk.get("/config/brokers/<default>")[0]) == {
            "version": 1, "config": {"message.max.bytes": "2000"}}
        assert json.loads(zk.get("/config/brokers/1")[0]) == {"version": 1, "config": {
            "log.retention.ms": "3600000", "follower.replication.throttled.rate": "1000000"}}
        changes = [json.loads(zk.get(f"/config/changes/{c}")[0])["entity_path"]
                   for c in sorted(zk.get_children("/config/changes"))]
        assert changes == ["brokers/<default>", "brokers/1"]
    finally:
        zk.stop()

    def applied() -> bool:
        return (all(_broker_config(cluster, b, "message.max.bytes") == ("2000", DEFAULT)
                    for b in (0, 1, 2))
                and _broker_config(cluster, 1, "log.retention.ms") == ("3600000", DYNAMIC)
                and _broker_config(cluster, 0, "log.retention.ms")[1] != DYNAMIC)

    wait_until(applied, 10, "every broker applying the default, broker 1 its own")
    assert _produce(cluster, "big", 5000) == "MSG_SIZE_TOO_LARGE"  # led by broker 2
    res = _configs(cluster, "--entity-name", "1", "--describe")
    assert "follower.replication.throttled.rate=1000000 sensitive=false synonyms={" \
        "DYNAMIC_BROKER_CONFIG:follower.replication.throttled.rate=1000000, " \
        "DEFAULT_CONFIG:follower.replication.throttled.rate=9223372036854775807}" in res.stdout

    cluster.broker(1).stop()
    cluster.broker(1).start()
    assert _broker_config(cluster, 1, "log.retention.ms") == ("3600000", DYNAMIC)
    assert _broker_config(cluster, 1, "message.max.bytes") == ("2000", DEFAULT)


def test_dynamic_unclean_election_default(cluster: Cluster) -> None:
    """A partition left without an in-sync replica stays leaderless until the cluster default
    unclean.leader.election.enable turns true; then the controller elects the out-of-sync
    replica at once (Kafka's enableDefaultUncleanLeaderElection)."""
    admin = cluster.admin()  # must outlive its futures
    admin.create_topics([NewTopic("lost", 1, replica_assignment=[[1, 2]])])["lost"].result(30)
    wait_until(lambda: cluster.has_leaders("lost", 1), 20, "a leader")
    cluster.broker(2).stop()
    wait_until(lambda: cluster.isr("lost")[0] == [1], 20, "broker 2 out of the ISR")
    cluster.broker(1).stop()
    cluster.broker(2).start()
    wait_until(lambda: cluster.every_broker_sees({0, 2}), 20, "brokers 0 and 2")
    time.sleep(2)
    assert cluster.leaders("lost") == {0: -1}
    _configs(cluster, "--entity-default", "--alter", "--add-config",
             "unclean.leader.election.enable=true")
    wait_until(lambda: cluster.leaders("lost") == {0: 2}, 10, "broker 2 elected")
