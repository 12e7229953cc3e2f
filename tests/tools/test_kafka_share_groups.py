"""kafka-share-groups (org.apache.kafka.tools.consumer.group.ShareGroupCommand, Kafka 4.x)
against Samsa: --list sends ListGroups with the share type filter, --describe --members reads
ShareGroupDescribe (members joined over the wire, tests/groups/test_share_groups_wire.py)."""

from __future__ import annotations

from tests.groups.clients import FAST
from tests.groups.test_share_groups_wire import _hb
from tests.protocol.wire import WireClient
from tests.support.java import run_java_tool

SHARE_GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"


def _rows(stdout: str) -> list[list[str]]:
    return [line.split() for line in stdout.splitlines() if line.strip()]


def test_kafka_share_groups_list_and_describe_members(broker_factory):
    b = broker_factory(settings=FAST)
    with WireClient(b.bootstrap) as w:
        r = w.call(19, 7, {"topics": [{"name": "t", "num_partitions": 2,
                                       "replication_factor": 1, "assignments": [],
                                       "configs": []}],
                           "timeout_ms": 10_000, "validate_only": False})
        assert r.topics[0].error_code == 0, r
        assert w.call(10, 3, {"key": "sg", "key_type": 0}).error_code == 0
        one = _hb(w, "sg", "member-one", 0)
        assert _hb(w, "sg", "member-two", 0).error_code == 0
        assert _hb(w, "sg", "member-one", one.member_epoch, topics=None).error_code == 0

    res = run_java_tool(SHARE_GROUP_COMMAND, ["--bootstrap-server", b.bootstrap, "--list",
                                              "--state", "stable"]).check()
    assert _rows(res.stdout) == [["GROUP", "STATE"], ["sg", "Stable"]], res.describe()
    res = run_java_tool(SHARE_GROUP_COMMAND, ["--bootstrap-server", b.bootstrap, "--describe",
                                              "--group", "sg", "--members"]).check()
    rows = {row[1]: row for row in _rows(res.stdout)[1:]}
    assert sorted(rows) == ["member-one", "member-two"], res.describe()
    assert rows["member-one"][-2:] == ["1", "t:0"] and rows["member-two"][-2:] == ["1", "t:1"]
