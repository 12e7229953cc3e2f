"""Transactions over the raw protocol: the coordinator state machine and the read path."""

from __future__ import annotations

import time
import uuid

from samsa.protocol.records import build_batch

from .txnwire import (
    CONCURRENT_TRANSACTIONS,
    DESCRIBE_PRODUCERS,
    INVALID_PRODUCER_EPOCH,
    INVALID_PRODUCER_ID_MAPPING,
    INVALID_TRANSACTION_TIMEOUT,
    INVALID_TXN_STATE,
    LIST_TXNS,
    PRODUCER_FENCED,
    TRANSACTIONAL_ID_NOT_FOUND,
    WRITE_MARKERS,
    TxnWire,
    committed_values,
    data_values,
    markers,
    txn_batch,
)


def _ids(prefix: str) -> tuple[str, str]:
    u = uuid.uuid4().hex[:8]
    return f"{prefix}-topic-{u}", f"{prefix}-txn-{u}"


def _wait(pred, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.05)


def _latest(c: TxnWire, topic: str, isolation: int) -> int:
    r = c.call(
        2,
        5,
        {
            "replica_id": -1,
            "isolation_level": isolation,
            "topics": [{"name": topic, "partitions": [{"partition_index": 0, "timestamp": -1}]}],
        },
    )
    return r.topics[0].partitions[0].offset


def _listed(c: TxnWire, txn: str) -> str | None:
    r = c.call(LIST_TXNS, 1, {"state_filters": [], "producer_id_filters": []})
    return next(
        (s.transaction_state for s in r.transaction_states if s.transactional_id == txn), None
    )


def test_idempotent_retry_is_not_appended_twice(shared_broker):
    topic, _ = _ids("idem")
    with TxnWire(shared_broker.bootstrap) as c:
        c.create_topic(topic)
        r = c.init_pid(None, version=0)
        assert r.error_code == 0 and r.producer_id >= 0 and r.producer_epoch == 0
        pid = r.producer_id
        b0 = build_batch(
            [(None, b"a", [], 1), (None, b"b", [], 1)],
            producer_id=pid,
            producer_epoch=0,
            base_sequence=0,
        )
        b1 = build_batch([(None, b"c", [], 1)], producer_id=pid, producer_epoch=0, base_sequence=2)
        assert c.produce(topic, 0, b0) == (0, 0)
        assert c.produce(topic, 0, b1) == (0, 2)
        assert c.produce(topic, 0, b0) == (0, 0)  # duplicate: same base offset, not appended
        assert c.produce(topic, 0, b1) == (0, 2)
        part = c.fetch(topic, 0, 0, 0)
        assert part.high_watermark == 3
        assert data_values(part.records) == [b"a", b"b", b"c"]


def test_commit_and_abort_visibility_and_lso(shared_broker):
    topic, txn = _ids("vis")
    with TxnWire(shared_broker.bootstrap) as c:
        c.create_topic(topic)
        r = c.init_until_ready(txn)
        assert r.error_code == 0
        pid, epoch = r.producer_id, r.producer_epoch
        # transaction 1: committed
        assert c.add_partitions(txn, pid, epoch, [(topic, 0)]) == {(topic, 0): 0}
        assert c.produce(topic, 0, txn_batch(pid, epoch, 0, [b"c1", b"c2"]), txn) == (0, 0)
        # open transaction: read_committed is held at the LSO, read_uncommitted is not
        committed = c.fetch(topic, 0, 0, 1)
        assert committed.last_stable_offset == 0 and data_values(committed.records) == []
        assert data_values(c.fetch(topic, 0, 0, 0).records) == [b"c1", b"c2"]
        assert c.describe_txn(txn).transaction_state == "Ongoing"
        assert _latest(c, topic, 1) == 0 and _latest(c, topic, 0) == 2  # LSO vs HW
        assert c.end_txn(txn, pid, epoch, True) == 0
        part = _wait(lambda: (p := c.fetch(topic, 0, 0, 1)).last_stable_offset == 3 and p)
        assert part, "commit marker never written"
        assert data_values(part.records) == [b"c1", b"c2"]
        assert markers(part.records) == [(pid, epoch, True)]
        assert list(part.aborted_transactions) == []
        # retry of a completed commit is fine, abort of it is not
        assert _wait(lambda: c.describe_txn(txn).transaction_state == "CompleteCommit")
        assert c.end_txn(txn, pid, epoch, True) == 0
        assert c.end_txn(txn, pid, epoch, False) == INVALID_TXN_STATE
        # transaction 2: aborted
        assert c.add_partitions(txn, pid, epoch, [(topic, 0)]) == {(topic, 0): 0}
        assert c.produce(topic, 0, txn_batch(pid, epoch, 2, [b"a1"]), txn) == (0, 3)
        assert c.end_txn(txn, pid, epoch, False) == 0
        assert _wait(lambda: c.fetch(topic, 0, 0, 1).last_stable_offset == 5)
        rc = c.fetch(topic, 0, 0, 1)
        assert [(a.producer_id, a.first_offset) for a in rc.aborted_transactions] == [(pid, 3)]
        assert committed_values(rc) == [b"c1", b"c2"]
        ru = c.fetch(topic, 0, 0, 0)
        assert data_values(ru.records) == [b"c1", b"c2", b"a1"]  # not vacuous
        assert ru.aborted_transactions is None or list(ru.aborted_transactions) == []
        assert _wait(lambda: c.describe_txn(txn).transaction_state == "CompleteAbort")
        assert c.end_txn(txn, pid, epoch, False) == 0
        assert c.end_txn(txn, pid, epoch, True) == INVALID_TXN_STATE


def test_fencing_a_zombie(shared_broker):
    topic, txn = _ids("fence")
    with TxnWire(shared_broker.bootstrap) as c:
        c.create_topic(topic)
        old = c.init_until_ready(txn)
        pid, epoch = old.producer_id, old.producer_epoch
        assert c.add_partitions(txn, pid, epoch, [(topic, 0)]) == {(topic, 0): 0}
        assert c.produce(topic, 0, txn_batch(pid, epoch, 0, [b"zombie"]), txn)[0] == 0
        # a new instance with the same transactional.id: the open txn is aborted first
        first = c.init_pid(txn)
        assert first.error_code == CONCURRENT_TRANSACTIONS
        new = c.init_until_ready(txn)
        assert new.error_code == 0
        assert new.producer_id == pid and new.producer_epoch > epoch
        # the zombie is fenced everywhere
        assert c.end_txn(txn, pid, epoch, True, version=3) == PRODUCER_FENCED
        assert c.end_txn(txn, pid, epoch, True, version=1) == INVALID_PRODUCER_EPOCH
        assert c.add_partitions(txn, pid, epoch, [(topic, 0)]) == {(topic, 0): PRODUCER_FENCED}
        code, _ = c.produce(topic, 0, txn_batch(pid, epoch, 1, [b"late"]), txn)
        assert code == INVALID_PRODUCER_EPOCH
        # KIP-360 with the stale epoch is fenced too; wrong pid is a bad mapping
        assert c.init_pid(txn, pid=pid, epoch=epoch).error_code == PRODUCER_FENCED
        assert c.init_pid(txn, pid=pid, epoch=epoch, version=3).error_code == INVALID_PRODUCER_EPOCH
        assert c.end_txn(txn, pid + 1000, new.producer_epoch, True) == INVALID_PRODUCER_ID_MAPPING
        rc = c.fetch(topic, 0, 0, 1)
        assert committed_values(rc) == [] and rc.last_stable_offset == 2
        assert data_values(rc.records) == [b"zombie"]
        assert [a.producer_id for a in rc.aborted_transactions] == [pid]
        # KIP-360 with the current epoch bumps it
        bumped = c.init_pid(txn, pid=pid, epoch=new.producer_epoch)
        assert (bumped.error_code, bumped.producer_epoch) == (0, new.producer_epoch + 1)


def test_invalid_requests(shared_broker):
    with TxnWire(shared_broker.bootstrap) as c:
        txn = f"bad-{uuid.uuid4().hex[:8]}"
        assert c.init_pid(txn, timeout_ms=900_001).error_code == INVALID_TRANSACTION_TIMEOUT
        assert c.init_pid(txn, timeout_ms=0).error_code == INVALID_TRANSACTION_TIMEOUT
        assert c.init_pid("").error_code == 42
        assert c.init_pid(txn, pid=5, epoch=-1).error_code == 42
        assert c.end_txn(txn, 1, 0, True) == INVALID_PRODUCER_ID_MAPPING
        r = c.init_until_ready(txn)
        assert c.end_txn(txn, r.producer_id, r.producer_epoch, True) == INVALID_TXN_STATE
        codes = c.add_partitions(txn, r.producer_id, r.producer_epoch, [("no-such-topic-xyz", 0)])
        assert codes == {("no-such-topic-xyz", 0): 3}
        assert c.describe_txn("nope-" + txn).error_code == TRANSACTIONAL_ID_NOT_FOUND


def test_describe_list_and_admin_abort(shared_broker):
    topic, txn = _ids("admin")
    with TxnWire(shared_broker.bootstrap) as c:
        c.create_topic(topic)
        r = c.init_until_ready(txn, timeout_ms=45000)
        pid, epoch = r.producer_id, r.producer_epoch
        assert c.add_partitions(txn, pid, epoch, [(topic, 0)]) == {(topic, 0): 0}
        assert c.produce(topic, 0, txn_batch(pid, epoch, 0, [b"x"]), txn)[0] == 0
        d = c.describe_txn(txn)
        assert (d.error_code, d.transaction_state, d.producer_id) == (0, "Ongoing", pid)
        assert [(t.topic, list(t.partitions)) for t in d.topics] == [(topic, [0])]
        lst = c.call(
            LIST_TXNS,
            1,
            {
                "state_filters": ["Ongoing", "Bogus"],
                "producer_id_filters": [pid],
                "duration_filter": -1,
            },
        )
        assert lst.error_code == 0 and list(lst.unknown_state_filters) == ["Bogus"]
        assert [(s.transactional_id, s.transaction_state) for s in lst.transaction_states] == [
            (txn, "Ongoing")
        ]
        dp = c.call(DESCRIBE_PRODUCERS, 0, {"topics": [{"name": topic, "partition_indexes": [0]}]})
        prods = dp.topics[0].partitions[0].active_producers
        assert [(p.producer_id, p.current_txn_start_offset) for p in prods] == [(pid, 0)]
        # Admin.abortTransaction: WriteTxnMarkers(abort) straight to the leader
        w = c.call(
            WRITE_MARKERS,
            1,
            {
                "markers": [
                    {
                        "producer_id": pid,
                        "producer_epoch": epoch,
                        "transaction_result": False,
                        "topics": [{"name": topic, "partition_indexes": [0]}],
                        "coordinator_epoch": 0,
                    }
                ]
            },
        )
        assert w.markers[0].topics[0].partitions[0].error_code == 0
        rc = c.fetch(topic, 0, 0, 1)
        assert rc.last_stable_offset == 2 and [a.producer_id for a in rc.aborted_transactions] == [
            pid
        ]


def test_transactional_produce_needs_partition_in_transaction(shared_broker):
    topic, txn = _ids("verify")
    with TxnWire(shared_broker.bootstrap) as c:
        c.create_topic(topic)
        r = c.init_until_ready(txn)
        pid, epoch = r.producer_id, r.producer_epoch
        batch = txn_batch(pid, epoch, 0, [b"unadded"])
        assert c.produce(topic, 0, batch, txn, version=9)[0] == INVALID_TXN_STATE
        assert c.produce(topic, 0, batch, txn, version=11)[0] == 120  # TRANSACTION_ABORTABLE
        assert c.produce(topic, 0, batch, None, version=9)[0] == 53
        assert c.add_partitions(txn, pid, epoch, [(topic, 0)]) == {(topic, 0): 0}
        assert c.produce(topic, 0, batch, txn, version=9) == (0, 0)
        assert c.produce(topic, 0, txn_batch(pid, epoch, 1, [b"more"]), txn) == (0, 1)
        assert c.end_txn(txn, pid, epoch, True) == 0
        assert _wait(lambda: c.fetch(topic, 0, 0, 1).last_stable_offset == 3)


def test_transactional_id_expires(broker_factory):
    b = broker_factory(
        {
            "transactional.id.expiration.ms": 500,
            "transaction.remove.expired.transaction.cleanup.interval.ms": 200,
        }
    )
    _, txn = _ids("expire")
    with TxnWire(b.bootstrap) as c:
        r = c.init_until_ready(txn)
        assert r.error_code == 0
        # (DescribeTransactions of an Empty txn carries start time -1, which kio cannot read)
        assert _listed(c, txn) == "Empty"
        assert _wait(lambda: _listed(c, txn) is None)
        assert c.describe_txn(txn).error_code == TRANSACTIONAL_ID_NOT_FOUND
    b.stop()
    b.start()  # the tombstone is replayed: still gone
    with TxnWire(b.bootstrap) as c:
        assert _wait(lambda: c.describe_txn(txn).error_code == TRANSACTIONAL_ID_NOT_FOUND)
        again = c.init_until_ready(txn)
        assert again.error_code == 0 and again.producer_id != r.producer_id
