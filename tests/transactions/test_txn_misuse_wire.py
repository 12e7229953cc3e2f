"""Protocol misuse with a raw client: Kafka's error codes, and nothing written before is lost.

Complements test_wire_txn.py (which covers fencing, EndTxn on Empty / after completion, a lone
unknown topic): sequence gaps, EndTxn racing a completion, a mixed known/unknown
AddPartitionsToTxn, TxnOffsetCommit from a stale generation / unknown member / stale epoch,
and requests with an epoch from the future."""

from __future__ import annotations

import time
import uuid

from samsa.protocol.records import build_batch

from .txnwire import (
    ADD_OFFSETS,
    INIT_PID,
    INVALID_TXN_STATE,
    PRODUCER_FENCED,
    TxnWire,
    committed_values,
    data_values,
    txn_batch,
)

OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47
OPERATION_NOT_ATTEMPTED = 55
UNKNOWN_TOPIC_OR_PARTITION = 3
ILLEGAL_GENERATION = 22
UNKNOWN_MEMBER_ID = 25
TRANSACTION_ABORTABLE = 120
TXN_OFFSET_COMMIT, OFFSET_COMMIT, OFFSET_FETCH = 28, 8, 9
FIND, JOIN, SYNC = 10, 11, 14
SUB = b"\x00\x00\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff"  # ConsumerProtocolSubscription v0


def _ids(prefix: str) -> tuple[str, str]:
    u = uuid.uuid4().hex[:8]
    return f"{prefix}-topic-{u}", f"{prefix}-txn-{u}"


def _wait_lso(c: TxnWire, topic: str, lso: int) -> None:
    deadline = time.monotonic() + 15
    while c.fetch(topic, 0, 0, 1).last_stable_offset != lso:
        assert time.monotonic() < deadline, c.fetch(topic, 0, 0, 1)
        time.sleep(0.05)


def _plain(pid: int, epoch: int, seq: int, values: list[bytes]) -> bytes:
    return build_batch([(None, v, [], 1) for v in values], producer_id=pid,
                       producer_epoch=epoch, base_sequence=seq)


def test_sequence_gaps_and_epochs_keep_earlier_data(shared_broker):
    topic, txn = _ids("seq")
    with TxnWire(shared_broker.bootstrap) as c:
        c.create_topic(topic)
        # idempotent producer: a gap is refused, the next in-order batch is still accepted
        r = c.init_pid(None, version=0)
        pid = r.producer_id
        assert c.produce(topic, 0, _plain(pid, 0, 0, [b"i0", b"i1"])) == (0, 0)
        assert c.produce(topic, 0, _plain(pid, 0, 5, [b"gap"]))[0] == OUT_OF_ORDER_SEQUENCE_NUMBER
        # a new epoch must start at sequence 0
        assert c.produce(topic, 0, _plain(pid, 1, 3, [b"bad"]))[0] == OUT_OF_ORDER_SEQUENCE_NUMBER
        assert c.produce(topic, 0, _plain(pid, 0, 2, [b"i2"])) == (0, 2)
        assert c.produce(topic, 0, _plain(pid, 1, 0, [b"e1"])) == (0, 3)
        # ...after which the old epoch is stale
        assert c.produce(topic, 0, _plain(pid, 0, 3, [b"old"]))[0] == INVALID_PRODUCER_EPOCH

        # transactional producer: a gap inside the transaction, then a normal commit
        r = c.init_until_ready(txn)
        tpid, ep = r.producer_id, r.producer_epoch
        assert c.add_partitions(txn, tpid, ep, [(topic, 0)]) == {(topic, 0): 0}
        assert c.produce(topic, 0, txn_batch(tpid, ep, 0, [b"t0"]), txn) == (0, 4)
        code, _ = c.produce(topic, 0, txn_batch(tpid, ep, 3, [b"tgap"]), txn)
        assert code == OUT_OF_ORDER_SEQUENCE_NUMBER
        # an epoch from the future is fenced at the coordinator, the transaction goes on
        assert c.end_txn(txn, tpid, ep + 1, True) == PRODUCER_FENCED
        assert c.add_partitions(txn, tpid, ep + 1, [(topic, 0)]) == {(topic, 0): PRODUCER_FENCED}
        assert c.describe_txn(txn).transaction_state == "Ongoing"
        assert c.produce(topic, 0, txn_batch(tpid, ep, 1, [b"t1"]), txn) == (0, 5)
        assert c.end_txn(txn, tpid, ep, True) == 0
        _wait_lso(c, topic, 7)
        part = c.fetch(topic, 0, 0, 1)
        assert committed_values(part) == [b"i0", b"i1", b"i2", b"e1", b"t0", b"t1"]
        assert part.high_watermark == 7


def test_end_txn_wrong_state_and_mixed_add_partitions(shared_broker):
    topic, txn = _ids("state")
    with TxnWire(shared_broker.bootstrap) as c:
        c.create_topic(topic)
        r = c.init_until_ready(txn)
        pid, ep = r.producer_id, r.producer_epoch
        # one unknown topic in the request: it fails, the others are not attempted
        codes = c.add_partitions(txn, pid, ep, [(topic, 0), ("no-such-topic-misuse", 0)])
        assert codes == {(topic, 0): OPERATION_NOT_ATTEMPTED,
                         ("no-such-topic-misuse", 0): UNKNOWN_TOPIC_OR_PARTITION}
        assert c.end_txn(txn, pid, ep, True) == INVALID_TXN_STATE  # nothing was added
        assert c.add_partitions(txn, pid, ep, [(topic, 0)]) == {(topic, 0): 0}
        assert c.produce(topic, 0, txn_batch(pid, ep, 0, [b"kept"]), txn) == (0, 0)
        assert c.end_txn(txn, pid, ep, True) == 0
        _wait_lso(c, topic, 2)
        # an aborted transaction, then commit right away (PrepareAbort or CompleteAbort)
        assert c.add_partitions(txn, pid, ep, [(topic, 0)]) == {(topic, 0): 0}
        assert c.produce(topic, 0, txn_batch(pid, ep, 1, [b"dropped"]), txn) == (0, 2)
        assert c.end_txn(txn, pid, ep, False) == 0
        assert c.end_txn(txn, pid, ep, True) == INVALID_TXN_STATE
        _wait_lso(c, topic, 4)
        assert c.end_txn(txn, pid, ep, True) == INVALID_TXN_STATE
        part = c.fetch(topic, 0, 0, 1)
        assert committed_values(part) == [b"kept"]
        assert data_values(c.fetch(topic, 0, 0, 0).records) == [b"kept", b"dropped"]


def _join_stable(c: TxnWire, group: str) -> tuple[int, str]:
    body = {"group_id": group, "session_timeout": 10000, "rebalance_timeout": 5000,
            "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": SUB}]}
    r = c.call(JOIN, 5, body)
    assert r.error_code == 79  # MEMBER_ID_REQUIRED
    r = c.call(JOIN, 5, dict(body, member_id=r.member_id))
    assert r.error_code == 0, r
    s = c.call(SYNC, 3, {"group_id": group, "generation_id": r.generation_id,
                         "member_id": r.member_id,
                         "assignments": [{"member_id": r.member_id, "assignment": b""}]})
    assert s.error_code == 0
    return r.generation_id, r.member_id


def _txn_commit(c, txn, group, pid, ep, gen, member, topic, offset, version=3) -> int:
    r = c.call(TXN_OFFSET_COMMIT, version, {
        "transactional_id": txn, "group_id": group, "producer_id": pid, "producer_epoch": ep,
        "generation_id": gen, "member_id": member, "group_instance_id": None,
        "topics": [{"name": topic, "partitions": [{
            "partition_index": 0, "committed_offset": offset, "committed_leader_epoch": -1,
            "committed_metadata": ""}]}]})
    return int(r.topics[0].partitions[0].error_code)


def _committed(c, group, topic) -> int:
    r = c.call(OFFSET_FETCH, 7, {"group_id": group, "topics": [
        {"name": topic, "partition_indexes": [0]}], "require_stable": True})
    assert r.error_code == 0
    return r.topics[0].partitions[0].committed_offset


def test_txn_offset_commit_stale_generation_member_and_epoch(broker_factory):
    b = broker_factory({"group.initial.rebalance.delay.ms": 0,
                        "offsets.topic.num.partitions": 5})
    topic, txn = _ids("txnoffs")
    group = f"misuse-group-{uuid.uuid4().hex[:8]}"
    with TxnWire(b.bootstrap) as c:
        c.create_topic(topic)
        c.call(FIND, 3, {"key": group, "key_type": 0})
        gen, member = _join_stable(c, group)
        r = c.call(OFFSET_COMMIT, 8, {"group_id": group, "generation_id_or_member_epoch": gen,
                                      "member_id": member, "topics": [{"name": topic,
                                      "partitions": [{"partition_index": 0,
                                                      "committed_offset": 5,
                                                      "committed_metadata": ""}]}]})
        assert r.topics[0].partitions[0].error_code == 0
        c.init_until_ready(txn)
        r = c.init_until_ready(txn)  # a second init: epoch 1, so that epoch 0 is stale
        pid, ep = r.producer_id, r.producer_epoch
        assert ep >= 1
        a = c.call(ADD_OFFSETS, 3, {"transactional_id": txn, "producer_id": pid,
                                    "producer_epoch": ep, "group_id": group})
        assert a.error_code == 0
        a = c.call(ADD_OFFSETS, 3, {"transactional_id": txn, "producer_id": pid,
                                    "producer_epoch": ep - 1, "group_id": group})
        assert a.error_code == PRODUCER_FENCED
        assert _txn_commit(c, txn, group, pid, ep, gen + 1, member, topic, 7) == \
            ILLEGAL_GENERATION
        assert _txn_commit(c, txn, group, pid, ep, gen, "ghost", topic, 7) == UNKNOWN_MEMBER_ID
        assert _committed(c, group, topic) == 5  # nothing pending from the refused commits
        assert _txn_commit(c, txn, group, pid, ep, gen, member, topic, 9) == 0
        assert _txn_commit(c, txn, group, pid, ep - 1, gen, member, topic, 8) == \
            INVALID_PRODUCER_EPOCH
        assert c.end_txn(txn, pid, ep, True) == 0
        deadline = time.monotonic() + 15
        while c.describe_txn(txn).transaction_state != "CompleteCommit":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert _committed(c, group, topic) == 9


def test_idempotent_init_producer_id_across_blocks_is_unique_or_retriable(shared_broker):
    """1,500 pipelined idempotent InitProducerId requests use up the first block of 1,000
    ids faster than the next is claimed (in the background, prefetched at 90 %): each answer
    is a fresh id or COORDINATOR_LOAD_IN_PROGRESS (14), which a client retries; no id twice."""
    body = {"transactional_id": None, "transaction_timeout": 60000, "producer_id": -1,
            "producer_epoch": -1}
    with TxnWire(shared_broker.bootstrap) as w:
        frames = [w.encode_request(INIT_PID, 4, body) for _ in range(1500)]
        w.send_raw(b"".join(data for _corr, data in frames))
        answers = [w.read_response(INIT_PID, 4, corr) for corr, _data in frames]
        retried = 0
        for a in answers:
            assert a.error_code in (0, 14), a
        pids = [a.producer_id for a in answers if a.error_code == 0]
        for a in answers:
            if a.error_code == 14:
                assert a.producer_id == -1
                for _ in range(100):
                    again = w.call(INIT_PID, 4, body)
                    if again.error_code == 0:
                        pids.append(again.producer_id)
                        retried += 1
                        break
                    assert again.error_code == 14, again
                    time.sleep(0.05)
    assert len(pids) == 1500 and len(set(pids)) == 1500
    assert retried == sum(a.error_code == 14 for a in answers)


def _partition_of_fetch(c, group, topic):
    r = c.call(OFFSET_FETCH, 7, {"group_id": group, "topics": [
        {"name": topic, "partition_indexes": [0]}], "require_stable": True})
    assert r.error_code == 0
    return r.topics[0].partitions[0]


def test_a_txn_offset_commit_after_its_transaction_ended_leaves_nothing_pending(shared_broker):
    """A TxnOffsetCommit that arrives after its transaction committed (a client's retry after
    a network cut) is verified with the transaction coordinator first (KIP-890, as Kafka's
    group coordinator verifies it) and refused. Written, its offsets would stay pending for
    good, and every OffsetFetch asking for stable offsets (a read_committed consumer's) would
    be answered UNSTABLE_OFFSET_COMMIT."""
    topic, txn = _ids("late-offsets")
    group = f"late-offsets-{uuid.uuid4().hex[:8]}"
    with TxnWire(shared_broker.bootstrap) as c:
        c.create_topic(topic)
        deadline = time.monotonic() + 15
        while c.call(FIND, 3, {"key": group, "key_type": 0}).error_code != 0:
            assert time.monotonic() < deadline, "no group coordinator"
            time.sleep(0.05)
        for version, refused in ((3, INVALID_TXN_STATE), (4, TRANSACTION_ABORTABLE)):
            r = c.init_until_ready(txn)
            pid, ep = r.producer_id, r.producer_epoch
            a = c.call(ADD_OFFSETS, 3, {"transactional_id": txn, "producer_id": pid,
                                        "producer_epoch": ep, "group_id": group})
            assert a.error_code == 0
            assert _txn_commit(c, txn, group, pid, ep, -1, "", topic, 10 * version,
                               version) == 0
            assert c.end_txn(txn, pid, ep, True) == 0
            deadline = time.monotonic() + 15
            while _partition_of_fetch(c, group, topic).committed_offset != 10 * version:
                assert time.monotonic() < deadline, "the commit's offsets never became stable"
                time.sleep(0.05)
            assert _txn_commit(c, txn, group, pid, ep, -1, "", topic, 99, version) == refused
            part = _partition_of_fetch(c, group, topic)
            assert (part.error_code, part.committed_offset) == (0, 10 * version)
