"""The registry in a 3-broker cluster: every broker answers (the ones that are not the primary
forward to it), and the kill -9 of the primary loses nothing: a new leader of `_schemas` takes
over with every schema and id, and ids go on from the last one."""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from samsa.broker.cluster.zk.process import ZooKeeperProcess
from tests.cluster.cluster import Cluster, create_topic, wait_until
from tests.support.broker import free_port


@pytest.fixture
def registry_cluster(tmp_path: Path) -> Iterator[tuple[Cluster, list[str]]]:
    zk = ZooKeeperProcess(tmp_path / "zookeeper", free_port()).start()
    cluster = Cluster(zk, tmp_path)
    urls = []
    for b in cluster.brokers:
        urls.append(f"http://127.0.0.1:{free_port()}")
        b.settings["schema.registry.listeners"] = urls[-1]
    try:
        cluster.start()
        yield cluster, urls
    finally:
        cluster.close()
        zk.stop()


def record(i: int) -> Schema:
    fields = [{"name": f"f{j}", "type": "int", "default": 0} for j in range(i)]
    return Schema(json.dumps({"type": "record", "name": "R", "fields": fields}), "AVRO")


def test_any_broker_serves_and_the_primarys_loss_loses_nothing(
        registry_cluster: tuple[Cluster, list[str]]) -> None:
    cluster, urls = registry_cluster
    clients = [SchemaRegistryClient({"url": u}) for u in urls]
    # each broker registers through itself: two of them forward to the primary
    ids = {f"s{i}": clients[i].register_schema(f"s{i}", record(i)) for i in range(3)}
    ids["s0-v2"] = clients[1].register_schema("s0", record(5))
    assert sorted(ids.values()) == [1, 2, 3, 4]
    wait_until(lambda: cluster.has_leaders("_schemas", 1), 20, "_schemas has a leader")
    primary = cluster.leaders("_schemas")[0]
    for c in clients:  # the same answers everywhere
        assert c.get_subjects() == ["s0", "s1", "s2"]
        assert c.get_latest_version("s0").schema_id == ids["s0-v2"]

    check_validation_on_every_broker(cluster, clients[0])

    cluster.broker(primary).kill9()
    wait_until(lambda: cluster.leaders("_schemas").get(0, primary) not in (primary, -1), 30,
               "a new leader of _schemas")
    survivors = [SchemaRegistryClient({"url": urls[i]}) for i in range(3) if i != primary]
    for c in survivors:
        assert c.get_subjects() == ["s0", "s1", "s2", "validated-value"]
        assert [c.get_version("s0", v).schema_id for v in (1, 2)] == [ids["s0"], ids["s0-v2"]]
        assert json.loads(c.get_schema(ids["s2"]).schema_str) == json.loads(
            record(2).schema_str)
    assert survivors[0].register_schema("s3", record(7)) == 6  # ids go on (5: validated-value)
    assert survivors[1].register_schema("s3", record(7)) == 6  # and are reused

    cluster.broker(primary).start()  # back, and a follower now: it forwards
    back = SchemaRegistryClient({"url": urls[primary]})
    assert back.get_latest_version("s3").schema_id == 6


def check_validation_on_every_broker(cluster: Cluster, registry: SchemaRegistryClient) -> None:
    """A validated topic with a partition led by each broker: the ones that are not the
    primary ask it about the ids."""
    topic = "validated"
    create_topic(cluster, topic, 3, 1, **{"confluent.value.schema.validation": "true"})
    primary = cluster.leaders("_schemas")[0]
    assert set(cluster.leaders(topic).values()) - {primary}, "all led by the primary"
    good = registry.register_schema(f"{topic}-value", Schema('{"type": "string"}', "AVRO"))
    assert good == 5
    producer = Producer({"bootstrap.servers": cluster.bootstrap})
    for value, expected in ((b"\x00" + struct.pack(">i", good) + b"\x02a", None),
                            (b"plain", KafkaError.INVALID_RECORD)):
        errors: dict[int, int | None] = {}

        def delivered(err: KafkaError | None, msg: object, into: dict = errors) -> None:
            into[msg.partition()] = None if err is None else err.code()  # type: ignore[attr-defined]

        for p in range(3):
            producer.produce(topic, value, partition=p, on_delivery=delivered)
        assert producer.flush(30) == 0
        assert errors == {0: expected, 1: expected, 2: expected}
