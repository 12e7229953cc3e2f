"""`samsa group list|describe` of a streams group (KIP-1071) against a Samsa broker that
serves StreamsGroupHeartbeat and StreamsGroupDescribe: the member joined with a two-step
topology is described with its client, epoch and the source partitions of its active tasks,
and each partition's committed offset and lag, as tables and as JSON."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer

from samsa.broker.admin import topics as admin_topics
from samsa.broker.admin.client import Admin, Settings, check
from tests.admin.conftest import Samsa
from tests.groups.clients import FAST
from tests.support.broker import BrokerProcess

STREAMS = {**FAST, "unstable.api.versions.enable": True,
           "unstable.feature.versions.enable": True,
           "initial.feature.levels": "streams.version=1"}
STREAMS_GROUP_HEARTBEAT = 88


@pytest.fixture(scope="module")
def streams_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("admin-streams") / "data",
                      name="admin-streams", settings=STREAMS)
    b.start()
    try:
        yield b
    finally:
        b.close()


def topology(app: str, source: str) -> dict[str, Any]:
    """Read `source`, re-key into a repartition topic, count from it (the broker creates
    the repartition topic)."""
    return {"epoch": 0, "subtopologies": [
        {"subtopology_id": "0", "source_topics": [source], "source_topic_regex": [],
         "state_changelog_topics": [], "repartition_sink_topics": [f"{app}-rekey-repartition"],
         "repartition_source_topics": [], "copartition_groups": []},
        {"subtopology_id": "1", "source_topics": [], "source_topic_regex": [],
         "state_changelog_topics": [], "repartition_sink_topics": [],
         "repartition_source_topics": [{"name": f"{app}-rekey-repartition", "partitions": 0,
                                        "replication_factor": 0, "topic_configs": []}],
         "copartition_groups": []}]}


def streams_member(admin: Admin, app: str, source: str) -> dict[str, Any]:
    """Join `app` as one streams member (StreamsGroupHeartbeat v0) and beat until it has
    active tasks of both subtopologies; its member id and tasks."""
    member_id, epoch = uuid.uuid4().hex, 0
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        first = epoch == 0
        body = {"group_id": app, "member_id": member_id, "member_epoch": epoch,
                "endpoint_information_epoch": 0, "instance_id": None, "rack_id": None,
                "rebalance_timeout": 10_000 if first else -1,
                "topology": topology(app, source) if first else None,
                "active_tasks": [] if first else None, "standby_tasks": [] if first else None,
                "warmup_tasks": [] if first else None,
                "process_id": "process-1" if first else None, "user_endpoint": None,
                "client_tags": [] if first else None, "task_offsets": None,
                "task_end_offsets": None, "shutdown_application": False}
        r = admin.coordinator(app).call(STREAMS_GROUP_HEARTBEAT, body, 0)
        check(r.error_code, r.error_message)
        epoch = int(r.member_epoch)
        tasks = {t.subtopology_id: list(t.partitions) for t in r.active_tasks or ()}
        if {"0", "1"} <= set(tasks):
            return {"member_id": member_id, "epoch": epoch, "tasks": tasks}
        time.sleep(0.2)
    pytest.fail("the streams member got no tasks in 30 s")


def test_describe_a_streams_group(streams_broker: BrokerProcess, samsa: Samsa) -> None:
    b = streams_broker.bootstrap
    app, source = f"app-{uuid.uuid4().hex[:8]}", f"events-{uuid.uuid4().hex[:8]}"
    with Admin(Settings({"bootstrap.servers": b})) as admin:
        admin_topics.create(admin, source, 2, 1, {})
        p = Producer({"bootstrap.servers": b})
        for i in range(6):
            p.produce(source, b"v%d" % i, partition=i % 2)
        assert p.flush(30) == 0
        member = streams_member(admin, app, source)
    assert member["tasks"] == {"0": [0, 1], "1": [0, 1]}

    (listed,) = [g for g in samsa("group", "list", "--format", "json", bootstrap=b).json()
                 if g["group_id"] == app]
    assert (listed["type"], listed["protocol_type"]) == ("streams", "streams")
    (d,) = samsa("group", "describe", app, "--format", "json", bootstrap=b).json()
    assert (d["type"], d["protocol_type"], d["state"]) == ("streams", "streams", "Stable")
    (m,) = d["members"]
    assert (m["member_id"], m["member_epoch"]) == (member["member_id"], member["epoch"])
    assert m["assignment"] == [{"topic": f"{app}-rekey-repartition", "partitions": [0, 1]},
                               {"topic": source, "partitions": [0, 1]}]
    rows = {(o["topic"], o["partition"]): (o["current_offset"], o["log_end_offset"], o["lag"],
                                           o["member_id"]) for o in d["offsets"]}
    assert rows[(source, 0)] == (None, 3, None, member["member_id"])
    assert rows[(f"{app}-rekey-repartition", 1)] == (None, 0, None, member["member_id"])

    out = samsa("group", "describe", app, bootstrap=b).out.splitlines()
    assert out[0].startswith(f"Group: {app}  Type: streams  State: Stable  ")
