"""`samsa reassign execute|list|cancel` and `samsa elect-leaders` on three Samsa brokers
joined through ZooKeeper: a partition's replicas moved (--move, --wait with progress, and
kafka-reassign-partitions.sh's JSON), the records still there, Kafka's errors, and the preferred
leader elected."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import NewTopic

from samsa.broker.cluster.zk.process import ZooKeeperProcess
from tests.admin.conftest import Samsa, parse_table
from tests.cluster.cluster import Cluster, wait_until
from tests.support.broker import free_port

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def three(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    zk = ZooKeeperProcess(tmp_path_factory.mktemp("admin-zk"), free_port()).start()
    try:
        c = Cluster(zk, tmp_path_factory.mktemp("admin-cluster")).start()
        try:
            yield c
        finally:
            c.close()
    finally:
        zk.stop()


def _replicas_and_leader(samsa: Samsa, b: str, topic: str) -> tuple[list[int], int]:
    (t,) = samsa("topic", "describe", topic, "--format", "json", bootstrap=b).json()
    (p,) = t["partition_details"]
    return p["replicas"], p["leader"]


def test_reassign_and_elect_leaders(three: Cluster, samsa: Samsa, tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    b, topic = three.bootstrap, "moving"
    admin = three.admin()  # kept: the futures need their client
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[[0]])])[topic].result(20)
    wait_until(lambda: three.has_leaders(topic, 1), 20, "a leader")
    monkeypatch.setattr("sys.stdin", io.StringIO("".join(f"r{i}\n" for i in range(50))))
    assert samsa("produce", topic, bootstrap=b).rc == 0

    r = samsa("reassign", "execute", "--move", f"{topic}:0=1,2", "--wait", "--format", "json",
              bootstrap=b)
    done = r.json()
    assert done["partitions"] == [{"topic": topic, "partition": 0, "replicas": [1, 2]}]
    assert done["done"] is True and done["seconds"] >= 0
    assert r.err.splitlines()[-1] == "samsa: all 1 partition(s) reassigned"
    assert _replicas_and_leader(samsa, b, topic)[0] == [1, 2]
    assert samsa("reassign", "list", "--format", "json", bootstrap=b).json() == []
    assert [x["value"] for x in samsa("consume", topic, "--from-beginning", "--format", "json",
                                      bootstrap=b).json()] == [f"r{i}" for i in range(50)]

    r = samsa("reassign", "cancel", f"{topic}:0", bootstrap=b)
    assert r.rc == 1 and r.err.startswith(f"samsa: NO_REASSIGNMENT_IN_PROGRESS: {topic}-0: ")
    r = samsa("reassign", "execute", "--move", f"{topic}:0=1,1", bootstrap=b)
    assert r.rc == 1 and r.err.startswith("samsa: INVALID_REPLICA_ASSIGNMENT")

    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [2, 1]}]}))
    out = samsa("reassign", "execute", "--reassignment-json-file", str(plan),
                bootstrap=b).out.splitlines()
    assert out[0] == "Started reassigning 1 partition(s)."
    assert parse_table(out[1:]) == [{"TOPIC": topic, "PARTITION": "0", "REPLICAS": "2,1"}]
    deadline = time.monotonic() + 60
    while samsa("reassign", "list", "--format", "json", bootstrap=b).json():
        assert time.monotonic() < deadline
        time.sleep(0.2)
    # the leader stays when it is among the new replicas (as in Kafka): 2 is preferred now
    assert _replicas_and_leader(samsa, b, topic) == ([2, 1], 1)
    rows = samsa("elect-leaders", "--election-type", "preferred", "--topic", topic,
                 "--format", "json", bootstrap=b).json()
    assert [(r["topic"], r["partition"], r["result"]) for r in rows] == [(topic, 0, "ELECTED")]
    wait_until(lambda: _replicas_and_leader(samsa, b, topic)[1] == 2, 20, "leader 2")
    out = samsa("elect-leaders", "--election-type", "preferred", "--all-topic-partitions",
                bootstrap=b).out.splitlines()
    # every partition: those whose preferred leader leads already are left out (as in Kafka)
    assert out[0].split() == ["TOPIC", "PARTITION", "RESULT"]
    assert all(r["RESULT"] == "ELECTED" for r in parse_table(out))
    assert topic not in {r["TOPIC"] for r in parse_table(out)}
    r = samsa("elect-leaders", "--election-type", "preferred", "--topic", topic,
              "--partition", "3", bootstrap=b)
    assert r.rc == 1 and r.err.startswith(f"samsa: UNKNOWN_TOPIC_OR_PARTITION: {topic}-3")
