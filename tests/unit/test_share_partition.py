"""A share-partition's in-flight records (broker/share/partition.py): one member at a time
per record, accept/release/reject, lock expiry, the delivery-count limit, the start offset,
and the state batches a persister keeps."""

from __future__ import annotations

from samsa.broker.share.partition import (
    AcknowledgeType,
    RecordState,
    SharePartitionState,
    StateBatch,
)
from samsa.protocol.errors import ErrorCode

ACCEPT, RELEASE, REJECT, GAP = (AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE,
                                AcknowledgeType.REJECT, AcknowledgeType.GAP)


def test_each_record_goes_to_one_member_at_a_time():
    sp = SharePartitionState(0, lock_ms=1000)
    assert sp.acquire("a", range(0, 3), 2, now_ms=0) == [(0, 1), (1, 1)]
    assert sp.acquire("b", range(0, 3), 10, now_ms=0) == [(2, 1)]  # 0 and 1 are a's
    assert sp.acknowledge("b", 0, 0, ACCEPT) == ErrorCode.invalid_record_state
    assert sp.acknowledge("a", 0, 1, ACCEPT) == ErrorCode.none
    assert sp.start_offset == 2  # moved past the accepted records
    assert sp.acknowledge("a", 0, 0, ACCEPT) == ErrorCode.invalid_record_state


def test_release_redelivers_and_reject_archives():
    sp = SharePartitionState(10)
    sp.acquire("a", [10, 11], 10, now_ms=0)
    assert sp.acknowledge("a", 10, 10, RELEASE) == ErrorCode.none
    assert sp.acknowledge("a", 11, 11, REJECT) == ErrorCode.none
    assert sp.fetch_offset() == 10
    assert sp.acquire("b", [10, 11, 12], 10, now_ms=0) == [(10, 2), (12, 1)]
    assert sp.records[11].state == RecordState.ARCHIVED


def test_expired_lock_makes_records_available_again():
    sp = SharePartitionState(0, lock_ms=1000)
    sp.acquire("a", [0, 1], 10, now_ms=0)
    assert sp.expire_locks(999) == 1000 and sp.acquire("b", [0, 1], 10, 999) == []
    assert sp.expire_locks(1000) is None
    assert sp.acquire("b", [0, 1], 10, now_ms=1000) == [(0, 2), (1, 2)]
    assert sp.acknowledge("a", 0, 0, ACCEPT) == ErrorCode.invalid_record_state


def test_delivery_count_limit_archives_a_poison_record():
    sp = SharePartitionState(0, delivery_limit=3)
    for delivery in (1, 2, 3):
        assert sp.acquire("a", [0, 1], 1, now_ms=0) == [(0, delivery)]
        sp.release_member("a")
    assert sp.start_offset == 1  # archived after its third delivery
    assert sp.acquire("a", [0, 1], 10, now_ms=0) == [(1, 1)]


def test_gaps_and_aborted_records_are_archived():
    sp = SharePartitionState(0)
    # 1 is a record of an aborted transaction (read_committed), 3 and 4 hold no record
    assert sp.acquire("a", [0, 1, 2, 5], 10, now_ms=0, aborted={1}) == [(0, 1), (2, 1), (5, 1)]
    assert [sp.records[o].state for o in (1, 3, 4)] == [RecordState.ARCHIVED] * 3
    assert sp.acknowledge("b", 3, 5, GAP) == ErrorCode.invalid_record_state  # 5 is a's
    assert sp.acknowledge("b", 3, 4, GAP) == ErrorCode.none  # no record there: fine
    assert sp.acknowledge("a", 0, 2, ACCEPT) == ErrorCode.invalid_record_state  # 1 not held
    for o in (0, 2, 5):
        assert sp.acknowledge("a", o, o, ACCEPT) == ErrorCode.none
    assert sp.start_offset == 6 and not sp.records


def test_state_batches_round_trip_and_redeliver_acquired_records():
    sp = SharePartitionState(0)
    sp.acquire("a", range(0, 5), 10, now_ms=0)
    sp.acknowledge("a", 1, 1, ACCEPT)
    sp.acknowledge("a", 2, 2, REJECT)
    batches = sp.state_batches()
    assert batches == [StateBatch(0, 0, RecordState.AVAILABLE, 1),
                       StateBatch(1, 1, RecordState.ACKNOWLEDGED, 1),
                       StateBatch(2, 2, RecordState.ARCHIVED, 1),
                       StateBatch(3, 4, RecordState.AVAILABLE, 1)]
    again = SharePartitionState.from_state_batches(sp.start_offset, batches)
    assert again.acquire("b", range(0, 6), 10, now_ms=0) == [(0, 2), (3, 2), (4, 2), (5, 1)]


def test_renew_extends_the_lock_and_move_start_forgets_earlier_records():
    sp = SharePartitionState(0, lock_ms=1000)
    sp.acquire("a", [0, 1], 10, now_ms=0)
    assert sp.acknowledge("b", 0, 0, AcknowledgeType.RENEW, now_ms=900) == \
        ErrorCode.invalid_record_state
    assert sp.acknowledge("a", 0, 0, AcknowledgeType.RENEW, now_ms=900) == ErrorCode.none
    assert sp.expire_locks(1000) == 1900  # 1 released, 0 still held until 1900
    assert sp.records[0].state == RecordState.ACQUIRED
    assert sp.records[1].state == RecordState.AVAILABLE
    sp.move_start(1)
    assert sp.start_offset == 1 and 0 not in sp.records and sp.fetch_offset() == 1


def test_counts_lock_timeouts_archivals_at_the_limit_and_batches():
    sp = SharePartitionState(0, lock_ms=1000, delivery_limit=2)
    sp.acquire("a", range(0, 4), 10, now_ms=0)
    assert sp.batch_count() == 1  # one run held by "a"
    assert sp.acknowledge("a", 1, 1, RELEASE) == ErrorCode.none
    assert sp.acknowledge("a", 2, 2, REJECT) == ErrorCode.none  # rejected: not at the limit
    assert sp.batch_count() == 4  # acquired, available, archived, acquired
    assert sp.expire_locks(1000) is None  # 0 and 3 time out (first delivery): available
    assert (sp.lock_timeouts, sp.archived_at_limit) == (2, 0)
    assert sp.batch_count() == 3  # 0-1 available once, 2 archived, 3 available
    assert sp.acquire("b", range(0, 4), 10, now_ms=2000) == [(0, 2), (1, 2), (3, 2)]
    assert sp.release_member("b") == 3  # second deliveries: archived at the limit
    assert (sp.lock_timeouts, sp.archived_at_limit) == (2, 3)
    assert sp.batch_count() == 0 and sp.start_offset == 4
