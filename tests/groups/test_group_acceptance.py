"""Consumer-group acceptance gaps: the Java consumer as a group member (takeover on leave,
resume from committed offsets after a broker restart and a kill -9), and
COORDINATOR_LOAD_IN_PROGRESS while __consumer_offsets replays."""

from __future__ import annotations

import re
import socket
import time
import uuid
from collections import Counter

import pytest

from tests.groups.clients import FAST, create_topic, produce
from tests.support.java import JAVA_SRC, compile_java, jar_version, run_java_tool

OFFSET_FETCH = 9


def _values(res) -> list[str]:
    line = next((x for x in res.stdout.splitlines() if x.startswith("VALUES ")), None)
    assert line is not None, res.describe()
    return [v for v in line[len("VALUES "):].split(",") if v]


def _java(classes, classpath: str, *args: str):
    res = run_java_tool("GroupMembers", list(args), classpath=classpath,
                        extra_classpath=[classes], timeout=150)
    assert not res.timed_out and res.returncode == 0, res.describe()
    assert f"kafka-clients {jar_version(classpath)}" in res.stdout
    return res


@pytest.mark.timeout(420)
@pytest.mark.parametrize("classpath", ["kafka4", "clients39"])
def test_java_members_take_over_and_resume_after_restart_and_kill9(broker_factory, classpath):
    broker = broker_factory(settings=FAST)
    b = broker.bootstrap
    classes = compile_java([JAVA_SRC / "GroupMembers.java"], classpath=classpath)
    u = uuid.uuid4().hex[:8]
    topic, group = f"jgm-{u}", f"jgm-group-{u}"
    create_topic(b, topic, 6)
    produce(b, topic, 6, 60)
    # 3 members split 6 partitions, read and commit v0..v59; member 2 closes (LeaveGroup);
    # the 2 others take over all 6 partitions and read the 12 records Java produces next
    res = _java(classes, classpath, "takeover", b, topic, group, "6", "3", "60", "12")
    checks = re.findall(r"^CHECK (\S+) (OK|FAIL)", res.stdout, re.M)
    assert checks == [("split", "OK"), ("leave", "OK"), ("takeover", "OK"),
                      ("survivors_read", "OK"), ("close", "OK"), ("close", "OK")], res.describe()
    got = _values(res)
    assert Counter(got) == Counter(f"v{i}" for i in range(72)), res.describe()
    assignments = re.findall(r"^ASSIGNMENT (\d+) \[([\d, ]*)\]", res.stdout, re.M)
    assert [len(p.split(",")) for _, p in assignments] == [2, 2, 2, 3, 3], res.describe()

    start = 72
    for how in ("restart", "kill9"):
        produce(b, topic, 6, 9, start=start)
        if how == "restart":
            broker.stop()
        else:
            broker.kill9()
        broker.start()
        res = _java(classes, classpath, "resume", b, topic, group, "9")
        # exactly the records after the committed offsets: nothing skipped, nothing re-read
        assert sorted(_values(res)) == sorted(f"v{i}" for i in range(start, start + 9)), (
            how, res.describe())
        start += 9


# ------------------------------------------------------------- COORDINATOR_LOAD_IN_PROGRESS
LOAD_RECORDS = 100_000
LOAD_BATCH = 4000


def _offset_fetch_frame(group: str, topic: str, correlation: int) -> bytes:
    from tests.protocol.wire import WireClient

    w = WireClient.__new__(WireClient)
    w._correlation = correlation - 1
    _, data = w.encode_request(OFFSET_FETCH, 7, {
        "group_id": group, "topics": [{"name": topic, "partition_indexes": [0, 1]}],
        "require_stable": False})
    return data


def _read_fetch(sock: socket.socket, correlation: int):
    from tests.protocol.wire import WireClient

    w = WireClient.__new__(WireClient)
    w.sock = sock
    return w.read_response(OFFSET_FETCH, 7, correlation)


@pytest.mark.timeout(240)
def test_offset_fetch_during_load_answers_coordinator_load_in_progress(broker_factory):
    """A restarted broker replays a large __consumer_offsets partition in the background: an
    OffsetFetch sent as soon as the port accepts gets COORDINATOR_LOAD_IN_PROGRESS (14), then
    the offsets once loading is done.

    Deterministic because the listener opens only after the load task was created (the group
    coordinator starts before the server) and the replay of LOAD_RECORDS records takes seconds,
    far longer than the first request needs to arrive; the broker log's own "loaded ..." line
    is checked to count every record."""
    from samsa.coordinator.group.records import OffsetValue, offset_commit_key, offset_commit_value
    from samsa.coordinator.internal_log import partition_for
    from samsa.protocol.records import build_batch
    from samsa.storage.config import LogConfig
    from samsa.storage.log import Log
    from tests.protocol.wire import WireClient

    broker = broker_factory(settings=FAST)
    group, topic = f"load-{uuid.uuid4().hex[:8]}", "loaded-topic"
    with WireClient(broker.bootstrap) as w:
        w.call(10, 3, {"key": group, "key_type": 0})  # creates __consumer_offsets
        # the committed topic must exist (Kafka refuses offsets of unknown topics)
        created = w.call(19, 5, {"topics": [{"name": topic, "num_partitions": 2,
                                             "replication_factor": 1, "assignments": [],
                                             "configs": []}],
                                 "timeout_ms": 10_000, "validate_only": False})
        assert created.topics[0].error_code == 0, created
        r = w.call(8, 8, {"group_id": group, "generation_id_or_member_epoch": -1,
                          "member_id": "", "topics": [{"name": topic, "partitions": [
                              {"partition_index": 0, "committed_offset": 1,
                               "committed_metadata": ""}]}]})
        assert r.topics[0].partitions[0].error_code == 0
    broker.stop()
    p = partition_for(group, FAST["offsets.topic.num.partitions"])
    log = Log.open(broker.data_dir / f"__consumer_offsets-{p}",
                   LogConfig.from_properties({"cleanup.policy": "compact"}), recover=True)
    now = int(time.time() * 1000)
    # many commits of one group: the last one of partition 0 / 1 is what must be served
    for base in range(0, LOAD_RECORDS, LOAD_BATCH):
        recs = [(offset_commit_key(group, topic, i % 2),
                 offset_commit_value(OffsetValue(i, commit_timestamp=now)), [], now)
                for i in range(base, base + LOAD_BATCH)]
        log.append_as_leader(build_batch(recs), log.latest_epoch or 0, origin="coordinator")
    log.close()

    broker.start()  # returns as soon as the port accepts a connection
    with socket.create_connection((broker.host, broker.port), timeout=60) as sock:
        sock.sendall(_offset_fetch_frame(group, topic, 1))
        first = _read_fetch(sock, 1)
    assert first.error_code == 14, first  # COORDINATOR_LOAD_IN_PROGRESS
    deadline = time.monotonic() + 120
    with WireClient(broker.bootstrap, timeout=60) as w:
        while True:
            r = w.call(OFFSET_FETCH, 7, {"group_id": group, "topics": [
                {"name": topic, "partition_indexes": [0, 1]}], "require_stable": False})
            if r.error_code != 14:
                break
            assert time.monotonic() < deadline, "still loading after 120 s"
            time.sleep(0.1)
    assert r.error_code == 0
    assert [x.committed_offset for x in r.topics[0].partitions] == [LOAD_RECORDS - 2,
                                                                    LOAD_RECORDS - 1]
    m = re.search(rf"loaded __consumer_offsets-{p} \((\d+) records\) in (\d+) ms",
                  broker.log_text())
    assert m and int(m.group(1)) == LOAD_RECORDS + 1, broker.log_tail()
