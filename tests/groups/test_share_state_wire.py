"""The share coordinator (KIP-932) at the wire level: FindCoordinator's share keys, and the
persister APIs brokers send each other (Initialize/Read/Write/DeleteShareGroupState,
ReadShareGroupStateSummary) with Kafka's semantics: uninitialized share-partitions refused,
written state batches combined over the earlier ones, writes of an older leader fenced once a
newer one read, the state replayed from `__share_group_state` after a restart, deleted by a
tombstone; and Kafka's DumpLogSegments decodes the records written. The share groups' own
records in `__consumer_offsets` are replayed after a restart too."""

from __future__ import annotations

import io
import time
import uuid
from pathlib import Path

from samsa.coordinator.group.dump_log import dump_segment
from samsa.coordinator.share.coordinator import coordinator_key
from samsa.protocol.uuids import kafka_uuid_string
from tests.groups.test_share_fetch_wire import SHARE, setup_share_group
from tests.protocol.wire import WireClient
from tests.support.java import run_java_tool

INITIALIZE, READ, WRITE, DELETE, SUMMARY, FIND_COORDINATOR = 83, 84, 85, 86, 87, 10
NONE, INVALID_REQUEST, UNKNOWN_TOPIC_OR_PARTITION, FENCED_LEADER_EPOCH = 0, 42, 3, 74
AVAILABLE, ACKED, ARCHIVED = 0, 2, 4
LOADING = {14, 15, 16}  # COORDINATOR_LOAD_IN_PROGRESS, _NOT_AVAILABLE, NOT_COORDINATOR


def _part(r):
    return r.results[0].partitions[0]


def _call(w, api, body):
    """The answer once the state partition is loaded (it is created on first use)."""
    deadline = time.monotonic() + 10
    while True:
        r = w.call(api, 0, body)
        if _part(r).error_code not in LOADING or time.monotonic() > deadline:
            return r
        time.sleep(0.05)


def _body(group, tid, **partition):
    return {"group_id": group, "topics": [{"topic_id": tid, "partitions": [
        {"partition": 0, **partition}]}]}


def _read(w, group, tid, leader_epoch):
    return _part(_call(w, READ, _body(group, tid, leader_epoch=leader_epoch)))


def _write(w, group, tid, leader_epoch, start, batches):
    return _part(_call(w, WRITE, _body(group, tid, state_epoch=0, leader_epoch=leader_epoch,
                                        start_offset=start, state_batches=[
                                            {"first_offset": f, "last_offset": la,
                                             "delivery_state": s, "delivery_count": c}
                                            for f, la, s, c in batches])))


def _batches(p):
    return [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
            for b in p.state_batches]


def test_persister_apis_and_the_state_topic(broker_factory):
    b = broker_factory(settings={**SHARE, "share.coordinator.state.topic.num.partitions": 3})
    group = "sg-state"
    with WireClient(b.bootstrap) as w:
        tid = setup_share_group(w, "share-state", group, [])
        key = coordinator_key(group, tid, 0)
        assert key == f"{group}:{kafka_uuid_string(tid)}:0"
        found = w.call(FIND_COORDINATOR, 4, {"key_type": 2, "coordinator_keys": [key, "x:y"]})
        by_key = {c.key: c for c in found.coordinators}
        assert by_key[key].error_code == NONE and by_key[key].node_id == 0, found
        assert by_key["x:y"].error_code == INVALID_REQUEST, found

        assert _read(w, group, tid, 1).error_code == INVALID_REQUEST  # never initialized
        assert _part(_call(w, SUMMARY, _body(group, tid, leader_epoch=-1))).start_offset == -1
        r = _call(w, INITIALIZE, _body(group, tid, state_epoch=0, start_offset=5))
        assert _part(r).error_code == NONE, r
        p = _read(w, group, tid, 3)
        assert (p.error_code, p.start_offset, _batches(p)) == (NONE, 5, [])
        assert _write(w, group, tid, 3, 5, [(5, 9, ACKED, 1), (10, 12, AVAILABLE, 2)]) \
            .error_code == NONE
        # a later write overrides the offsets it names; the start offset drops what is before
        assert _write(w, group, tid, 3, 8, [(10, 10, ARCHIVED, 2)]).error_code == NONE
        expected = [(8, 9, ACKED, 1), (10, 10, ARCHIVED, 2), (11, 12, AVAILABLE, 2)]
        p = _read(w, group, tid, 3)
        assert (p.start_offset, _batches(p)) == (8, expected)
        # a newer leader read the state: the older one's writes are fenced
        assert _read(w, group, tid, 4).error_code == NONE
        assert _write(w, group, tid, 3, 9, []).error_code == FENCED_LEADER_EPOCH
        assert _read(w, group, tid, 3).error_code == FENCED_LEADER_EPOCH
        unknown = _part(_call(w, INITIALIZE, _body(group, uuid.uuid4(), state_epoch=0,
                                                    start_offset=0)))
        assert unknown.error_code == UNKNOWN_TOPIC_OR_PARTITION

    b.stop()
    b.start()
    with WireClient(b.bootstrap) as w:
        p = _read(w, group, tid, 4)
        assert (p.error_code, p.start_offset, _batches(p)) == (NONE, 8, expected)
        summary = _part(_call(w, SUMMARY, _body(group, tid, leader_epoch=-1)))
        assert (summary.start_offset, summary.leader_epoch) == (8, 4)
        assert _part(_call(w, DELETE, _body(group, tid))).error_code == NONE
        assert _read(w, group, tid, 4).error_code == INVALID_REQUEST

    # Kafka's own tool reads the records (keys and values) written to the state topic
    state_dir = next(d for d in b.data_dir.glob("__share_group_state-*")
                     if any(f.stat().st_size for f in d.glob("*.log")))
    res = run_java_tool("org.apache.kafka.tools.DumpLogSegments", [
        "--share-group-state-decoder", "--files", str(state_dir / "00000000000000000000.log")])
    assert res.returncode == 0, res.stderr
    out = res.stdout
    kid = kafka_uuid_string(tid)
    key_json = f'"data":{{"groupId":"{group}","topicId":"{kid}","partition":0}}}}'
    assert f'key: {{"type":"0",{key_json} payload: {{"version":"0","data":{{"snapshotEpoch":0,' \
        '"stateEpoch":0,"leaderEpoch":-1,"startOffset":5,' in out, out  # Initialize
    assert f'key: {{"type":"1",{key_json} payload: {{"version":"0","data":{{"snapshotEpoch":0,' \
        '"leaderEpoch":3,"startOffset":8,"stateBatches":[{"firstOffset":10,"lastOffset":10,' \
        '"deliveryState":4,"deliveryCount":2}]}}' in out, out  # the second write
    assert f'key: {{"type":"0",{key_json} payload: <DELETE>' in out, out


def test_delivery_complete_count_is_kept_and_read_back(broker_factory):
    """KIP-1226: WriteShareGroupState v1 carries the delivery-complete count, the share
    coordinator keeps it in its records (Kafka's tagged field, which DumpLogSegments decodes)
    as Kafka's shard settles it, and ReadShareGroupStateSummary v1 answers it, after a restart
    too; v0 of either knows nothing of it."""
    b = broker_factory(settings={**SHARE, "share.coordinator.state.topic.num.partitions": 1})
    group = "sg-count"

    def summary(w, version):
        return _part(w.call(SUMMARY, version, _body(group, tid, leader_epoch=-1)))

    def write(w, start, count, batches=()):
        body = _body(group, tid, state_epoch=0, leader_epoch=1, start_offset=start,
                     delivery_complete_count=count, state_batches=[
                         {"first_offset": f, "last_offset": la, "delivery_state": st,
                          "delivery_count": c} for f, la, st, c in batches])
        return _part(w.call(WRITE, 1, body)).error_code

    with WireClient(b.bootstrap) as w:
        tid = setup_share_group(w, "share-count", group, [])
        # (FindCoordinator with a share key creates the state topic)
        w.call(FIND_COORDINATOR, 4, {"key_type": 2,
                                     "coordinator_keys": [coordinator_key(group, tid, 0)]})
        assert _part(_call(w, INITIALIZE, _body(group, tid, state_epoch=0, start_offset=10))) \
            .error_code == NONE
        assert summary(w, 1).delivery_complete_count == 0  # a start offset: counting from 0
        assert write(w, 10, 3, [(12, 14, ACKED, 1)]) == NONE
        assert write(w, 10, 2) == NONE  # the same start offset: the larger count stays
        assert summary(w, 1).delivery_complete_count == 3
        assert write(w, 15, 0) == NONE  # the start offset moved on: the written count
        assert write(w, 16, 1, [(18, 18, ARCHIVED, 1)]) == NONE
        assert not hasattr(summary(w, 0), "delivery_complete_count")
    b.stop()
    b.start()
    with WireClient(b.bootstrap) as w:
        got = summary(w, 1)
        assert (got.error_code, got.start_offset, got.delivery_complete_count) == (NONE, 16, 1)

    state_dir = next(d for d in b.data_dir.glob("__share_group_state-*")
                     if any(f.stat().st_size for f in d.glob("*.log")))
    res = run_java_tool("org.apache.kafka.tools.DumpLogSegments", [
        "--share-group-state-decoder", "--files", str(state_dir / "00000000000000000000.log")])
    assert res.returncode == 0, res.stderr
    assert '"startOffset":10,"deliveryCompleteCount":0,' in res.stdout, res.stdout
    assert '"startOffset":16,"deliveryCompleteCount":1,' in res.stdout, res.stdout


def _log_start(w, partition):
    r = w.call(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": "__share_group_state", "partitions": [
            {"partition_index": partition, "current_leader_epoch": -1, "timestamp": -2}]}]})
    return r.topics[0].partitions[0].offset


def test_state_topic_is_pruned_not_compacted(broker_factory):
    """Updates every write, a snapshot every second update: the records before the latest
    snapshot are deleted (the state topic's cleanup.policy is delete, as in Kafka), and the
    state read back after a restart is the same."""
    b = broker_factory(settings={**SHARE, "share.coordinator.state.topic.num.partitions": 1,
                                 "share.coordinator.snapshot.update.records.per.snapshot": 2,
                                 "share.coordinator.state.topic.prune.interval.ms": 300})
    group = "sg-prune"
    with WireClient(b.bootstrap) as w:
        tid = setup_share_group(w, "share-prune", group, [])
        found = w.call(FIND_COORDINATOR, 4, {"key_type": 2, "coordinator_keys": [
            coordinator_key(group, tid, 0)]})  # creates the state topic
        assert found.coordinators[0].error_code == NONE, found
        r = _call(w, INITIALIZE, _body(group, tid, state_epoch=0, start_offset=0))
        assert _part(r).error_code == NONE, r
        for i in range(7):
            assert _write(w, group, tid, -1, i, [(i, i, ACKED, 1), (i + 1, i + 3, AVAILABLE, i)]) \
                .error_code == NONE
        expected = [(6, 6, ACKED, 1), (7, 9, AVAILABLE, 6)]
        p = _read(w, group, tid, -1)
        assert (p.start_offset, _batches(p)) == (6, expected)
        deadline = time.monotonic() + 10
        while _log_start(w, 0) == 0:
            assert time.monotonic() < deadline, "the state topic was never pruned"
            time.sleep(0.1)
        # offsets 0..7: the snapshot, 7 writes (a snapshot at 3 and at 6); pruned up to 6
        assert _log_start(w, 0) == 6
        configs = w.call(32, 4, {"resources": [{"resource_type": 2,
                                                "resource_name": "__share_group_state",
                                                "configuration_keys": ["cleanup.policy"]}],
                                 "include_synonyms": False, "include_documentation": False})
        assert configs.results[0].configs[0].value == "delete"
    b.stop()
    b.start()
    with WireClient(b.bootstrap) as w:
        p = _read(w, group, tid, -1)
        assert (p.error_code, p.start_offset, _batches(p)) == (NONE, 6, expected)


def _describe_offsets(w, group, topic):
    r = w.call(90, 0, {"groups": [{"group_id": group, "topics": [
        {"topic_name": topic, "partitions": [0]}]}]})
    g = r.groups[0]
    assert g.error_code == NONE, r
    p = g.topics[0].partitions[0]
    assert p.error_code == NONE, r
    return p.start_offset


def test_share_group_offsets_describe_alter_delete(broker_factory):
    """The offsets admin APIs read and change the persisted start offset; the leader reads the
    altered state when its next session starts; kafka-share-groups resets and shows it."""
    from tests.groups.test_share_fetch_wire import _acquired, _batch, _fetch, produce_values

    b = broker_factory(settings=SHARE)
    group, topic, m = "sg-offsets", "share-offsets", uuid.uuid4().hex
    with WireClient(b.bootstrap) as w:
        tid = setup_share_group(w, topic, group, [m])
        produce_values(b.bootstrap, topic, [f"v{i}" for i in range(5)])
        assert len(_acquired(_fetch(w, group, m, 0, tid, max_records=3, wait_ms=2000))) == 3
        r = _fetch(w, group, m, 1, tid, acks=[_batch(0, 2, 1)], max_records=1)
        assert r.responses[0].partitions[0].acknowledge_error_code == NONE, r
        assert _describe_offsets(w, group, topic) == 3
        alter = {"group_id": group, "topics": [{"topic_name": topic, "partitions": [
            {"partition_index": 0, "start_offset": 1}]}]}
        assert w.call(91, 0, alter).error_code == 68  # NON_EMPTY_GROUP: a member is in it
        assert _fetch(w, group, m, -1, None).error_code == NONE  # closes the session
        r = w.call(76, 1, {"group_id": group, "member_id": m, "member_epoch": -1,
                           "rack_id": None, "subscribed_topic_names": None})
        assert r.error_code == NONE, r

    res = run_java_tool("org.apache.kafka.tools.consumer.group.ShareGroupCommand", [
        "--bootstrap-server", b.bootstrap, "--reset-offsets", "--to-earliest", "--execute",
        "--group", group, "--topic", topic])
    assert res.returncode == 0, res.stderr + res.stdout
    with WireClient(b.bootstrap) as w:
        assert _describe_offsets(w, group, topic) == 0
    res = run_java_tool("org.apache.kafka.tools.consumer.group.ShareGroupCommand", [
        "--bootstrap-server", b.bootstrap, "--describe", "--offsets", "--group", group])
    assert res.returncode == 0, res.stderr
    rows = [line.split() for line in res.stdout.splitlines() if topic in line]
    assert rows and rows[0][:4] == [group, topic, "0", "0"], res.stdout

    with WireClient(b.bootstrap) as w:
        r = w.call(76, 1, {"group_id": group, "member_id": m, "member_epoch": 0,
                           "rack_id": None, "subscribed_topic_names": [topic]})
        assert r.error_code == NONE, r
        # the new session reads the reset state: from offset 0 on, 0..2 delivered again
        got = _acquired(_fetch(w, group, m, 0, tid, wait_ms=2000))
        assert sorted(got) == [0, 1, 2, 3, 4], got
        assert _fetch(w, group, m, -1, None).error_code == NONE
        r = w.call(76, 1, {"group_id": group, "member_id": m, "member_epoch": -1,
                           "rack_id": None, "subscribed_topic_names": None})
        r = w.call(92, 0, {"group_id": group, "topics": [{"topic_name": topic}]})
        assert r.error_code == NONE and r.responses[0].error_code == NONE, r
        assert _describe_offsets(w, group, topic) == -1


def test_delete_groups_deletes_the_share_state(broker_factory):
    """DeleteGroups of an empty share group deletes its share-partitions' state first: the
    group created again under its name reads from share.auto.offset.reset."""
    from tests.groups.test_share_fetch_wire import _acquired, _batch, _fetch, produce_values

    b = broker_factory(settings=SHARE)
    group, topic, m = "sg-delete", "share-delete", uuid.uuid4().hex
    with WireClient(b.bootstrap) as w:
        tid = setup_share_group(w, topic, group, [m])
        produce_values(b.bootstrap, topic, ["a", "b"])
        assert len(_acquired(_fetch(w, group, m, 0, tid, wait_ms=2000))) == 2
        r = _fetch(w, group, m, -1, tid, acks=[_batch(0, 1, 1)])
        assert r.error_code == NONE, r
        assert _describe_offsets(w, group, topic) == 2
        leave = {"group_id": group, "member_id": m, "member_epoch": -1, "rack_id": None,
                 "subscribed_topic_names": None}
        assert w.call(76, 1, leave).error_code == NONE
        r = w.call(42, 2, {"groups_names": [group]})
        assert r.results[0].error_code == NONE, r
        join = {**leave, "member_epoch": 0, "subscribed_topic_names": [topic]}
        assert w.call(76, 1, join).error_code == NONE
        assert _describe_offsets(w, group, topic) == -1
        assert sorted(_acquired(_fetch(w, group, m, 0, tid, wait_ms=2000))) == [0, 1]


def test_share_group_records_survive_a_restart(broker_factory):
    """The group's records in `__consumer_offsets` (Kafka's share-group record types, which
    Kafka's DumpLogSegments decodes) are replayed after a kill -9: the members heartbeat on at
    their epochs, DescribeShareGroupOffsets lists the group's topic (its
    ShareGroupStatePartitionMetadata); DeleteGroups' tombstones delete it for good."""
    b = broker_factory(settings={**SHARE, "offsets.topic.num.partitions": 1})
    group, topic, m1, m2 = "sg-durable", "share-durable", uuid.uuid4().hex, uuid.uuid4().hex
    hb = {"group_id": group, "rack_id": None, "subscribed_topic_names": None}
    with WireClient(b.bootstrap) as w:
        tid = setup_share_group(w, topic, group, [m1, m2])
        r = w.call(76, 1, {**hb, "member_id": m1, "member_epoch": 1})
        assert (r.error_code, r.member_epoch) == (NONE, 2), r
    b.kill9()
    b.start()
    with WireClient(b.bootstrap) as w:
        for m in (m1, m2):
            r = _until_loaded(lambda m=m: w.call(76, 1, {**hb, "member_id": m, "member_epoch": 2}))
            assert (r.error_code, r.member_epoch, r.assignment) == (NONE, 2, None), r
        r = w.call(90, 0, {"groups": [{"group_id": group, "topics": None}]})
        assert [t.topic_name for t in r.groups[0].topics] == [topic], r
        for m in (m1, m2):
            assert w.call(76, 1, {**hb, "member_id": m, "member_epoch": -1}).error_code == NONE
        assert w.call(42, 2, {"groups_names": [group]}).results[0].error_code == NONE
    segment = str(b.data_dir / "__consumer_offsets-0" / "00000000000000000000.log")
    res = run_java_tool("org.apache.kafka.tools.DumpLogSegments",
                        ["--offsets-decoder", "--files", segment])
    assert res.returncode == 0 and "Error" not in res.stdout, res.stdout + res.stderr
    kid = kafka_uuid_string(tid)
    for record in (
            f'{{"type":"11","data":{{"groupId":"{group}"}}}} payload: {{"version":"0",'
            '"data":{"epoch":2,"metadataHash":0}}',
            f'{{"type":"14","data":{{"groupId":"{group}","memberId":"{m1}"}}}} payload: '
            '{"version":"0","data":{"memberEpoch":2,"previousMemberEpoch":1,"state":0,'
            f'"assignedPartitions":[{{"topicId":"{kid}","partitions":[0]}}]}}}}',
            f'{{"type":"15","data":{{"groupId":"{group}"}}}} payload: {{"version":"0","data":'
            f'{{"initializingTopics":[],"initializedTopics":[{{"topicId":"{kid}","topicName":'
            f'"{topic}","partitions":[0]}}],"deletingTopics":[]}}}}',
            f'{{"type":"11","data":{{"groupId":"{group}"}}}} payload: <DELETE>'):
        assert record in res.stdout, res.stdout
    out = io.StringIO()  # and `samsa dump-log`
    dump_segment(Path(segment), out)
    assert f'"type":"share_group_current_member_assignment","group":"{group}","member":' \
        f'"{m1}"}} payload: {{"memberEpoch":2,"previousMemberEpoch":1,' in out.getvalue()
    assert f'"initializedTopics":[{{"topicId":"{tid}","topicName":"{topic}"' in out.getvalue()
    b.kill9()
    b.start()
    with WireClient(b.bootstrap) as w:
        r = _until_loaded(lambda: w.call(76, 1, {**hb, "member_id": m1, "member_epoch": 2}))
        assert r.error_code == 69, r  # GROUP_ID_NOT_FOUND


def _until_loaded(call):
    deadline = time.monotonic() + 10
    while (r := call()).error_code in LOADING and time.monotonic() < deadline:
        time.sleep(0.05)
    return r
