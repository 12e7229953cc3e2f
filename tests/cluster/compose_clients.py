"""The host-side clients of tests/cluster/test_docker_compose.py, one step per run:

    python -m tests.cluster.compose_clients create TOPIC
    python -m tests.cluster.compose_clients produce TOPIC TAG N
    python -m tests.cluster.compose_clients consume TOPIC
    python -m tests.cluster.compose_clients partitions TOPIC

Each prints one JSON document. They bootstrap from the published ports on 127.0.0.1 and then
follow the addresses the brokers advertise (samsa-1..3; samsa-3 is brokers 3 and 4), which
the caller makes resolve to 127.0.0.1, as docker-compose.yml tells a user to.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from tests.clients import pyclients
from tests.clients.pyclients import Rec

BOOTSTRAP = "127.0.0.1:19092,127.0.0.1:19093,127.0.0.1:19094,127.0.0.1:19095"
BROKERS = 4  # samsa-1, samsa-2 and samsa-3's two processes
PARTITIONS = 4  # one led by each broker


def create(topic: str) -> dict[str, Any]:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
    # A healthy container accepts connections; placement needs every broker registered.
    deadline = time.monotonic() + 60
    while len(brokers := admin.list_topics(timeout=30).brokers) < BROKERS:
        if time.monotonic() > deadline:
            raise RuntimeError(f"only brokers {sorted(brokers)} registered")
        time.sleep(0.5)
    new = NewTopic(topic, num_partitions=PARTITIONS, replication_factor=3,
                   config={"min.insync.replicas": "2"})
    admin.create_topics([new], operation_timeout=30, request_timeout=30)[topic].result(60)
    return partitions(topic)


def partitions(topic: str) -> dict[str, Any]:
    """{partition: {"leader": id, "replicas": [ids], "isr": [ids]}} as the cluster's
    metadata says."""
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": BOOTSTRAP}).list_topics(topic, timeout=30)
    t = md.topics[topic]
    if t.error is not None:
        raise RuntimeError(f"{topic}: {t.error}")
    return {str(p.id): {"leader": p.leader, "replicas": list(p.replicas),
                        "isr": sorted(p.isrs)}
            for p in t.partitions.values()}


def produce(topic: str, tag: str, n: int) -> list[list[Any]]:
    """Every client produces n records (acks=all); one [client, partition, offset, value] per
    acknowledged record."""
    acked = []
    for client in pyclients.CLIENTS:
        recs = [Rec(f"{client}/{tag}/{i % 7}".encode(), f"{client}/{tag}/{i}".encode(), (),
                    0) for i in range(n)]
        for partition, offset, rec in pyclients.produce(client, BOOTSTRAP, topic, "none", recs):
            assert rec.value is not None
            acked.append([client, partition, offset, rec.value.decode()])
    return acked


def consume(topic: str) -> dict[str, list[list[Any]]]:
    """Every client reads the whole topic: {client: [[partition, offset, value], ...]}."""
    out = {}
    for client in pyclients.CLIENTS:
        n_partitions, records = pyclients.consume_all(client, BOOTSTRAP, topic)
        assert n_partitions == PARTITIONS, (client, n_partitions)
        out[client] = [[r.partition, r.offset, (r.rec.value or b"").decode()] for r in records]
    return out


def main(argv: list[str]) -> None:
    step, topic, *rest = argv
    if step == "create":
        result: object = create(topic)
    elif step == "produce":
        result = produce(topic, rest[0], int(rest[1]))
    elif step == "consume":
        result = consume(topic)
    elif step == "partitions":
        result = partitions(topic)
    else:
        raise SystemExit(f"unknown step {step}")
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
