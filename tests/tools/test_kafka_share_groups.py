"""kafka-share-groups (org.apache.kafka.tools.consumer.group.ShareGroupCommand, Kafka 4.x)
against Samsa: --list sends ListGroups with the share type filter, --describe --members reads
ShareGroupDescribe (members joined over the wire, tests/groups/test_share_groups_wire.py),
--describe --offsets reads DescribeShareGroupOffsets v1 and prints each partition's lag."""

from __future__ import annotations

import pytest

from tests.groups.clients import FAST, produce
from tests.groups.test_share_consumers_java import hold_records
from tests.groups.test_share_fetch_wire import SHARE, setup_share_group
from tests.groups.test_share_groups_wire import _hb
from tests.protocol.wire import WireClient
from tests.support.java import JAVA_SRC, compile_java, run_java_tool

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


@pytest.mark.timeout(300)
def test_kafka_share_groups_describe_offsets_lag_is_the_unacknowledged_count(
        broker_factory, tmp_path):
    """KIP-1226: with one Java share consumer holding the first records it got (acquired,
    never acknowledged) and another accepting, rejecting and releasing records after them,
    `--describe --offsets` shows the start offset at the held records and a lag equal to the
    records not yet acknowledged: neither accepted nor rejected."""
    b = broker_factory(settings={**SHARE, "group.share.record.lock.duration.ms": 60_000})
    classes = compile_java([JAVA_SRC / "ShareConsumers.java"], classpath="kafka4")
    total = 30
    with WireClient(b.bootstrap) as w:
        setup_share_group(w, "share-lag", "sg-lag", [])
    produce(b.bootstrap, "share-lag", 1, total)
    holder, _ = hold_records(b.bootstrap, "share-lag", "sg-lag", classes, tmp_path / "hold.log")
    try:
        res = run_java_tool("ShareConsumers", ["drain", b.bootstrap, "share-lag", "sg-lag",
                                               "12"], extra_classpath=[classes], timeout=120)
        assert not res.timed_out and res.returncode == 0, res.describe()
        settled = {line.split()[1] for line in res.stdout.splitlines()
                   if line.startswith(("ACCEPTED ", "REJECTED "))}
        res = run_java_tool(SHARE_GROUP_COMMAND, ["--bootstrap-server", b.bootstrap,
                                                  "--describe", "--group", "sg-lag",
                                                  "--offsets"]).check()
    finally:
        holder.kill9()
    rows = _rows(res.stdout)
    assert rows[0] == ["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"], res.describe()
    # the held records (from offset 0) keep the start offset; those settled after them count
    assert rows[1] == ["sg-lag", "share-lag", "0", "0", str(total - len(settled))], (
        res.describe(), sorted(settled))
    assert 12 <= len(settled) < total
