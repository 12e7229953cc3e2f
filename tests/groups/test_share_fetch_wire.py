"""ShareFetch and ShareAcknowledge (KIP-932) at the wire level: records acquired for a member
of a share group, accepted, released (redelivered with a higher delivery count), rejected,
released when the acquisition lock expires, archived at the delivery-count limit, never held by
two members at once, and aborted transactions skipped under read_committed."""

from __future__ import annotations

import time
import uuid

from samsa.protocol.records import decode_records, iter_batches
from tests.groups.clients import FAST
from tests.protocol.wire import WireClient

SHARE_HEARTBEAT, SHARE_FETCH, SHARE_ACK, ALTER_CONFIGS = 76, 78, 79, 44
NONE, UNKNOWN_MEMBER_ID, INVALID_REQUEST, INVALID_RECORD_STATE = 0, 25, 42, 121
SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH = 122, 123
ACCEPT, RELEASE, REJECT = 1, 2, 3
SHARE = {**FAST, "share.coordinator.state.topic.num.partitions": 5}


def setup_share_group(w, topic, group, members, configs=(), partitions=1):
    """A topic of one partition, the group reading from the earliest offset, and `members`
    joined (share.version 1 is a new cluster's level); returns the topic id."""
    r = w.call(19, 7, {"topics": [{"name": topic, "num_partitions": partitions,
                                   "replication_factor": 1,
                                   "assignments": [], "configs": []}],
                       "timeout_ms": 10_000, "validate_only": False})
    assert r.topics[0].error_code == NONE, r
    tid = r.topics[0].topic_id
    configs = [("share.auto.offset.reset", "earliest"), *configs]
    r = w.call(ALTER_CONFIGS, 1, {"validate_only": False, "resources": [
        {"resource_type": 32, "resource_name": group, "configs": [
            {"name": k, "config_operation": 0, "value": v} for k, v in configs]}]})
    assert r.responses[0].error_code == NONE, r
    assert w.call(10, 3, {"key": group, "key_type": 0}).error_code == NONE
    for m in members:
        r = w.call(SHARE_HEARTBEAT, 1, {"group_id": group, "member_id": m, "member_epoch": 0,
                                        "rack_id": None, "subscribed_topic_names": [topic]})
        assert r.error_code == NONE, r
    return tid


def produce_values(bootstrap, topic, values, partition=0):
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap})
    for v in values:
        p.produce(topic, v.encode(), partition=partition)
        p.flush(10)


def _fetch(w, group, member, epoch, tid, acks=(), max_records=100, wait_ms=0):
    r = w.call(SHARE_FETCH, 1, {
        "group_id": group, "member_id": member, "share_session_epoch": epoch,
        "max_wait": wait_ms, "min_bytes": 1, "max_bytes": 1 << 20, "max_records": max_records,
        "batch_size": max_records, "forgotten_topics_data": [],
        "topics": [{"topic_id": tid, "partitions": [{"partition_index": 0,
                                                    "acknowledgement_batches": list(acks)}]}]
        if tid is not None else []})
    return r


def _acquired(r, partition=0):
    """{offset: (value, delivery count)} of the records the response acquired."""
    assert r.error_code == NONE, r
    out = {}
    for t in r.responses:
        for p in t.partitions:
            if p.partition_index != partition:
                continue
            assert p.error_code == NONE, p
            values = {}
            for pos, h in iter_batches(p.records or b""):
                values.update({rec.offset: rec.value.decode()
                               for rec in decode_records(p.records, pos, h)})
            for a in p.acquired_records:
                for o in range(a.first_offset, a.last_offset + 1):
                    out[o] = (values[o], a.delivery_count)
    return out


def _session_fetch(w, group, member, epoch, tid, add=(), forget=()):
    return w.call(SHARE_FETCH, 1, {
        "group_id": group, "member_id": member, "share_session_epoch": epoch, "max_wait": 1000,
        "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 100, "batch_size": 100,
        "topics": [{"topic_id": tid, "partitions": [
            {"partition_index": i, "acknowledgement_batches": []} for i in add]}] if add else [],
        "forgotten_topics_data": [{"topic_id": tid, "partitions": list(forget)}] if forget
        else []})


def _ack(w, group, member, epoch, tid, batches):
    r = w.call(SHARE_ACK, 1, {"group_id": group, "member_id": member,
                              "share_session_epoch": epoch, "topics": [
                                  {"topic_id": tid, "partitions": [
                                      {"partition_index": 0,
                                       "acknowledgement_batches": batches}]}]})
    return r


def _batch(first, last, *types):
    return {"first_offset": first, "last_offset": last, "acknowledge_types": list(types)}


def test_accept_release_reject_and_session_errors(broker_factory):
    b = broker_factory(settings=SHARE)
    group, topic, m = "sg-ack", "share-ack", uuid.uuid4().hex
    with WireClient(b.bootstrap) as w:
        tid = setup_share_group(w, topic, group, [m])
        produce_values(b.bootstrap, topic, ["v0", "v1", "v2"])
        got = _acquired(_fetch(w, group, m, 0, tid, wait_ms=2000))
        assert got == {0: ("v0", 1), 1: ("v1", 1), 2: ("v2", 1)}
        r = _ack(w, group, m, 1, tid, [_batch(0, 2, ACCEPT, RELEASE, REJECT)])
        assert r.error_code == NONE and r.responses[0].partitions[0].error_code == NONE, r
        # only the released record comes back, delivered a second time
        assert _acquired(_fetch(w, group, m, 2, tid, wait_ms=2000)) == {1: ("v1", 2)}
        # offset 0 was accepted already: not this member's to acknowledge
        r = _ack(w, group, m, 3, tid, [_batch(0, 0, ACCEPT)])
        assert r.responses[0].partitions[0].error_code == INVALID_RECORD_STATE, r
        assert _fetch(w, group, m, 9, tid).error_code == INVALID_SHARE_SESSION_EPOCH
        assert _ack(w, group, "nobody", 1, tid, []).error_code == UNKNOWN_MEMBER_ID
        assert _ack(w, group, m, 0, tid, []).error_code == INVALID_SHARE_SESSION_EPOCH
        # the acknowledgement rides on the next ShareFetch; -1 closes the session
        r = _fetch(w, group, m, 4, tid, acks=[_batch(1, 1, ACCEPT)])
        assert r.responses[0].partitions[0].acknowledge_error_code == NONE, r
        assert _fetch(w, group, m, -1, tid).error_code == 42  # INVALID_REQUEST: fetches
        assert _fetch(w, group, m, -1, None).error_code == NONE
        assert _fetch(w, group, m, 5, tid).error_code == SHARE_SESSION_NOT_FOUND
        # everything was acknowledged: a new session finds nothing to acquire
        assert _acquired(_fetch(w, group, m, 0, tid, wait_ms=300)) == {}


def test_members_never_hold_one_record_and_closing_releases(broker_factory):
    b = broker_factory(settings=SHARE)
    group, topic = "sg-two", "share-two"
    m1, m2 = uuid.uuid4().hex, uuid.uuid4().hex
    with WireClient(b.bootstrap) as w:
        tid = setup_share_group(w, topic, group, [m1, m2])
        produce_values(b.bootstrap, topic, [f"v{i}" for i in range(10)])
        first = _acquired(_fetch(w, group, m1, 0, tid, max_records=5, wait_ms=2000))
        second = _acquired(_fetch(w, group, m2, 0, tid, max_records=10, wait_ms=2000))
        assert len(first) == 5 and len(second) == 5 and not first.keys() & second.keys()
        assert _acquired(_fetch(w, group, m2, 1, tid, wait_ms=200)) == {}  # all are held
        # a member leaving its group gives its records back at once
        r = w.call(SHARE_HEARTBEAT, 1, {"group_id": group, "member_id": m1, "member_epoch": -1,
                                        "rack_id": None, "subscribed_topic_names": None})
        assert r.error_code == NONE, r
        again = _acquired(_fetch(w, group, m2, 2, tid, wait_ms=2000))
        assert again == {o: (v, 2) for o, (v, _) in first.items()}
        assert _fetch(w, group, m1, 0, tid).error_code == UNKNOWN_MEMBER_ID


def test_incremental_session_adds_and_forgets_partitions(broker_factory):
    b = broker_factory(settings=SHARE)
    group, topic, m = "sg-inc", "share-inc", uuid.uuid4().hex
    with WireClient(b.bootstrap) as w:
        tid = setup_share_group(w, topic, group, [m], partitions=2)
        produce_values(b.bootstrap, topic, ["p0-a"], partition=0)
        produce_values(b.bootstrap, topic, ["p1-a"], partition=1)
        r = _session_fetch(w, group, m, 0, tid, add=[0])
        assert _acquired(r, 0) == {0: ("p0-a", 1)} and _acquired(r, 1) == {}
        r = _session_fetch(w, group, m, 1, tid, add=[1])  # the session now has both
        assert _acquired(r, 1) == {0: ("p1-a", 1)}
        produce_values(b.bootstrap, topic, ["p0-b"], partition=0)
        produce_values(b.bootstrap, topic, ["p1-b"], partition=1)
        r = _session_fetch(w, group, m, 2, tid, forget=[1])  # no partition named: all kept
        assert _acquired(r, 0) == {1: ("p0-b", 1)} and _acquired(r, 1) == {}


def test_closed_connection_releases_its_sessions_records(broker_factory):
    b = broker_factory(settings=SHARE)  # 30 s locks: only the closed connection frees them
    group, topic, m1, m2 = "sg-conn", "share-conn", uuid.uuid4().hex, uuid.uuid4().hex
    with WireClient(b.bootstrap) as w:
        tid = setup_share_group(w, topic, group, [m1, m2])
        produce_values(b.bootstrap, topic, ["a", "b"])
        with WireClient(b.bootstrap) as other:
            assert len(_acquired(_fetch(other, group, m1, 0, tid, wait_ms=2000))) == 2
        got = _acquired(_fetch(w, group, m2, 0, tid, wait_ms=3000))
        assert got == {0: ("a", 2), 1: ("b", 2)}


def test_lock_timeout_redelivers_until_the_delivery_limit(broker_factory):
    b = broker_factory(settings={**SHARE, "group.share.record.lock.duration.ms": 1000,
                                 "group.share.delivery.count.limit": 2})
    group, topic, m = "sg-lock", "share-lock", uuid.uuid4().hex
    with WireClient(b.bootstrap) as w:
        tid = setup_share_group(w, topic, group, [m])
        produce_values(b.bootstrap, topic, ["poison"])
        r = _fetch(w, group, m, 0, tid, wait_ms=2000)
        assert r.acquisition_lock_timeout.total_seconds() == 1.0
        assert _acquired(r) == {0: ("poison", 1)}
        started = time.monotonic()  # the long poll ends when the lock expires
        assert _acquired(_fetch(w, group, m, 1, tid, wait_ms=5000)) == {0: ("poison", 2)}
        assert time.monotonic() - started < 4
        # its second lock expires too: at the limit, the record is archived
        assert _acquired(_fetch(w, group, m, 2, tid, wait_ms=2500)) == {}
        r = _ack(w, group, m, 3, tid, [_batch(0, 0, ACCEPT)])
        assert r.responses[0].partitions[0].error_code == INVALID_RECORD_STATE, r


def test_read_committed_never_acquires_aborted_records(broker_factory):
    from confluent_kafka import Producer

    b = broker_factory(settings=SHARE)
    group, topic, m = "sg-txn", "share-txn", uuid.uuid4().hex
    with WireClient(b.bootstrap) as w:
        tid = setup_share_group(w, topic, group, [m], [("share.isolation.level", "read_committed")])
        p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": "share-txn"})
        p.init_transactions(10)
        for value, commit in (("c1", True), ("a1", False), ("a2", False), ("c2", True)):
            p.begin_transaction()
            p.produce(topic, value.encode(), partition=0)
            p.flush(10)
            (p.commit_transaction if commit else p.abort_transaction)(10)
        got = _acquired(_fetch(w, group, m, 0, tid, wait_ms=2000))
        assert sorted(v for v, _ in got.values()) == ["c1", "c2"], got
        assert _acquired(_fetch(w, group, m, 1, tid, wait_ms=300)) == {}


def test_librdkafka_share_consumers_explicit_acknowledgement(broker_factory):
    from confluent_kafka import AcknowledgeType, ShareConsumer

    b = broker_factory(settings=SHARE)
    group, topic = "sg-rdkafka", "share-rdkafka"
    with WireClient(b.bootstrap) as w:
        setup_share_group(w, topic, group, [])
    produce_values(b.bootstrap, topic, [f"v{i}" for i in range(20)])
    conf = {"bootstrap.servers": b.bootstrap, "group.id": group,
            "share.acknowledgement.mode": "explicit"}
    consumers = [ShareConsumer(conf), ShareConsumer(conf)]
    accepted, released, rejected = {}, set(), set()
    try:
        for c in consumers:
            c.subscribe([topic])
        deadline = time.monotonic() + 60
        while len(accepted) < 16 and time.monotonic() < deadline:
            for c in consumers:
                for msg in c.poll(0.5):
                    assert msg.error() is None, msg.error()
                    value, i = msg.value().decode(), int(msg.value()[1:])
                    if i % 5 == 4:
                        c.acknowledge(msg, AcknowledgeType.REJECT)
                        rejected.add(value)
                    elif i % 5 == 2 and msg.delivery_count() == 1:
                        c.acknowledge(msg, AcknowledgeType.RELEASE)
                        released.add(value)
                    else:
                        c.acknowledge(msg, AcknowledgeType.ACCEPT)
                        assert value not in accepted
                        accepted[value] = msg.delivery_count()
                c.commit_sync(10)
    finally:
        for c in consumers:
            c.close()
    assert rejected == {f"v{i}" for i in range(4, 20, 5)}
    assert released == {f"v{i}" for i in range(2, 20, 5)}
    assert accepted == {f"v{i}": 2 if i % 5 == 2 else 1 for i in range(20) if i % 5 != 4}


def test_renew_acknowledgement_extends_the_lock(broker_factory):
    b = broker_factory(settings={**SHARE, "group.share.record.lock.duration.ms": 1500})
    group, topic, m = "sg-renew", "share-renew", uuid.uuid4().hex
    with WireClient(b.bootstrap) as w:
        tid = setup_share_group(w, topic, group, [m])
        produce_values(b.bootstrap, topic, ["r"])
        assert _acquired(_fetch(w, group, m, 0, tid, wait_ms=2000)) == {0: ("r", 1)}
        renew = {"group_id": group, "member_id": m, "is_renew_ack": True, "topics": [
            {"topic_id": tid, "partitions": [{"partition_index": 0, "acknowledgement_batches": [
                _batch(0, 0, 4)]}]}]}
        assert w.call(SHARE_ACK, 1, {**renew, "share_session_epoch": 1}).responses[0] \
            .partitions[0].error_code == INVALID_REQUEST  # RENEW needs v2
        for epoch in (2, 3, 4):  # renewed every second: never released
            time.sleep(1)
            r = w.call(SHARE_ACK, 2, {**renew, "share_session_epoch": epoch})
            assert r.acquisition_lock_timeout.total_seconds() == 1.5
            assert r.responses[0].partitions[0].error_code == NONE, r
        r = _ack(w, group, m, 5, tid, [_batch(0, 0, ACCEPT)])
        assert r.responses[0].partitions[0].error_code == NONE, r
