"""kill -9 of the broker at each phase of a transaction spanning two partitions.

    ongoing          data written, no EndTxn: after the restart the transaction is still open
                     and the coordinator aborts it when its timeout expires
    prepare_commit   PrepareCommit logged, the COMMIT marker on partition 0 only: the restarted
                     coordinator writes the missing markers and completes the commit
    prepare_abort    the same with PrepareAbort / ABORT
    complete_commit  CompleteCommit logged: nothing is redone (no new marker)

A crash between the Prepare* record and the markers cannot be hit on purpose with kill -9
(EndTxn answers after both are done), so the on-disk state it leaves is built instead: the
first marker through WriteTxnMarkers, then the Prepare* record appended to
__transaction_state offline, as test_confluent_txn.test_prepared_transaction_is_completed_on_
restart does. In every case a new producer instance then commits one more transaction and
read_committed / read_uncommitted return every record exactly once.
"""

from __future__ import annotations

import time

import pytest

from .clients import consume_all, create_topic, txn_producer, unique
from .txnwire import WRITE_MARKERS, TxnWire, markers

PREPARE_COMMIT, PREPARE_ABORT = 2, 3
FINAL = {"ongoing": "CompleteAbort", "prepare_commit": "CompleteCommit",
         "prepare_abort": "CompleteAbort", "complete_commit": "CompleteCommit"}


def _append_txn_state(b, txn: str, d, status: int, partitions: list[tuple[str, int]]) -> None:
    """Append a __transaction_state record for `txn` (the broker must be down)."""
    from samsa.coordinator.internal_log import partition_for
    from samsa.coordinator.transaction.log import TxnLogValue, encode_key, encode_value
    from samsa.protocol.records import build_batch
    from samsa.storage.config import LogConfig
    from samsa.storage.log import Log

    now = int(time.time() * 1000)
    timeout_ms = int(d.transaction_timeout.total_seconds() * 1000)
    value = TxnLogValue(d.producer_id, d.producer_epoch, timeout_ms, status, tuple(partitions),
                        now, now - 100)
    tdir = b.data_dir / f"__transaction_state-{partition_for(txn, 50)}"
    log = Log.open(tdir, LogConfig.from_properties({"cleanup.policy": "compact"}), recover=True)
    log.append_as_leader(build_batch([(encode_key(txn), encode_value(value), [], now)]),
                         log.latest_epoch or 0, origin="coordinator")
    log.close()


def _wait_state(c: TxnWire, txn: str, state: str, timeout: float = 30):
    deadline = time.monotonic() + timeout
    while True:
        d = c.describe_txn(txn)
        if d.error_code == 0 and d.transaction_state == state:
            return d
        assert time.monotonic() < deadline, d
        time.sleep(0.1)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("phase", list(FINAL))
def test_kill9_at_each_transaction_phase(broker_factory, phase):
    b = broker_factory({"transaction.abort.timed.out.transaction.cleanup.interval.ms": 300})
    bs = b.bootstrap
    topic, txn = unique(f"crash-{phase.replace('_', '-')}")
    create_topic(bs, topic, partitions=2)
    p = txn_producer(bs, txn, **{"transaction.timeout.ms": 6000})
    p.init_transactions(20)
    p.begin_transaction()
    for part in (0, 1):
        p.produce(topic, value=f"base-{part}".encode(), partition=part)
    p.commit_transaction(20)
    p.begin_transaction()
    for part in (0, 1):
        p.produce(topic, value=f"crash-{part}".encode(), partition=part)
    p.flush(10)
    with TxnWire(bs) as c:
        d = _wait_state(c, txn, "Ongoing")
        if phase.startswith("prepare"):
            commit = phase == "prepare_commit"
            w = c.call(WRITE_MARKERS, 1, {"markers": [{
                "producer_id": d.producer_id, "producer_epoch": d.producer_epoch,
                "transaction_result": commit,
                "topics": [{"name": topic, "partition_indexes": [0]}],
                "coordinator_epoch": 0}]})
            assert w.markers[0].topics[0].partitions[0].error_code == 0
        if phase == "complete_commit":
            p.commit_transaction(20)
            d = _wait_state(c, txn, "CompleteCommit")
        hw_before = [c.fetch(topic, part, 0, 0).high_watermark for part in (0, 1)]
    b.kill9()
    if phase.startswith("prepare"):
        status = PREPARE_COMMIT if phase == "prepare_commit" else PREPARE_ABORT
        _append_txn_state(b, txn, d, status, [(topic, 0), (topic, 1)])
    p.purge()  # the old client instance is not used again
    b.start()

    with TxnWire(bs) as c:
        if phase == "ongoing":  # reloaded as open (LSO at its first record) until it times out
            while (now := c.describe_txn(txn)).error_code == 14:
                time.sleep(0.05)
            if now.transaction_state == "Ongoing":
                assert c.fetch(topic, 1, 0, 1).last_stable_offset == 2
        final = _wait_state(c, txn, FINAL[phase], timeout=40)
        assert (final.producer_id, final.producer_epoch) == (d.producer_id, d.producer_epoch) \
            or phase == "ongoing"  # (an abort on timeout bumps the epoch)
        commit = FINAL[phase] == "CompleteCommit"
        for part in (0, 1):
            fetched = c.fetch(topic, part, 0, 1)
            assert fetched.last_stable_offset == fetched.high_watermark
            kinds = [k for _, _, k in markers(fetched.records)]
            if phase == "complete_commit":
                assert fetched.high_watermark == hw_before[part]  # nothing rewritten
                assert kinds == [True, True]
            elif phase.startswith("prepare") and part == 0:
                # the marker written before the crash, then the coordinator's (idempotent) one
                assert kinds == [True, commit, commit]
            else:
                assert kinds == [True, commit]

    p2 = txn_producer(bs, txn)
    p2.init_transactions(30)
    p2.begin_transaction()
    for part in (0, 1):
        p2.produce(topic, value=f"after-{part}".encode(), partition=part)
    p2.commit_transaction(20)

    want = [b"base-0", b"base-1", b"after-0", b"after-1"]
    if commit:
        want += [b"crash-0", b"crash-1"]
    got = consume_all(bs, topic, "read_committed", partitions=2, expect=len(want))
    assert sorted(got) == sorted(want)
    assert len(consume_all(bs, topic, "read_committed", partitions=2, idle_s=1.0)) == len(want)
    everything = consume_all(bs, topic, "read_uncommitted", partitions=2, expect=6)
    assert sorted(everything) == sorted(
        [b"base-0", b"base-1", b"crash-0", b"crash-1", b"after-0", b"after-1"])
