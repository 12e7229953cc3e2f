"""ShareFetch (78) and ShareAcknowledge (79): the share session's epochs and the
acknowledgements' rules of KIP-932, as Kafka's SharePartitionManager and SharePartition keep
them. A session opens at epoch 0 and each request moves it on by one; -1 closes it. A
request with the wrong epoch is INVALID_SHARE_SESSION_EPOCH; acknowledging a record the member
has not acquired is INVALID_RECORD_STATE; a released record is delivered again."""

from __future__ import annotations

import uuid
from typing import Any

from samsa.protocol.errors import ErrorCode

from .harness import Handlers, values_of
from .test_share_groups import _share_fetch, _share_group

ACCEPT, RELEASE = 1, 2
FINAL = -1


def _acks(first: int, last: int, *types: int) -> list[dict[str, Any]]:
    return [{"first_offset": first, "last_offset": last, "acknowledge_types": list(types)}]


async def _acknowledge(h: Handlers, tid: uuid.UUID, epoch: int,
                       acks: list[dict[str, Any]]) -> Any:
    return await h.call("ShareAcknowledge", 1, {
        "group_id": "sg", "member_id": "m1", "share_session_epoch": epoch, "topics": [{
            "topic_id": tid, "partitions": [{"partition_index": 0,
                                             "acknowledgement_batches": acks}]}]})


async def _opened(h: Handlers) -> uuid.UUID:
    """A share group with one member whose session (epoch 0) acquired records 0 and 1."""
    tid = await _share_group(h)
    r = await h.call("ShareFetch", 1, _share_fetch(tid, 0))
    assert values_of(r.responses[0].partitions[0].records) == [b"a", b"b"]
    return tid


async def test_an_epoch_out_of_turn_is_refused(handlers):
    tid = await _opened(handlers)
    skipped = await handlers.call("ShareFetch", 1, _share_fetch(tid, 5))
    in_turn = await handlers.call("ShareFetch", 1, _share_fetch(tid, 1))
    assert skipped.error_code == ErrorCode.invalid_share_session_epoch
    assert in_turn.error_code == ErrorCode.none


async def test_share_acknowledge_cannot_open_a_session(handlers):
    tid = await _opened(handlers)
    r = await _acknowledge(handlers, tid, 0, _acks(0, 1, ACCEPT))
    assert r.error_code == ErrorCode.invalid_share_session_epoch


async def test_the_opening_request_carries_no_acknowledgements(handlers):
    tid = await _share_group(handlers)
    r = await handlers.call("ShareFetch", 1, _share_fetch(tid, 0, _acks(0, 1, ACCEPT)))
    assert r.error_code == ErrorCode.invalid_request


async def test_the_closing_request_asks_for_no_records(handlers):
    tid = await _opened(handlers)
    r = await handlers.call("ShareFetch", 1, _share_fetch(tid, FINAL))
    assert r.error_code == ErrorCode.invalid_request


async def test_acknowledging_records_not_acquired_is_an_invalid_record_state(handlers):
    tid = await _opened(handlers)
    r = await _acknowledge(handlers, tid, 1, _acks(5, 6, ACCEPT))
    assert r.error_code == ErrorCode.none
    assert r.responses[0].partitions[0].error_code == ErrorCode.invalid_record_state


async def test_one_type_per_offset_or_one_for_the_batch(handlers):
    tid = await _opened(handlers)
    r = await _acknowledge(handlers, tid, 1, _acks(0, 1, ACCEPT, ACCEPT, ACCEPT))
    assert r.responses[0].partitions[0].error_code == ErrorCode.invalid_request
    per_offset = await _acknowledge(handlers, tid, 2, _acks(0, 1, ACCEPT, RELEASE))
    assert per_offset.responses[0].partitions[0].error_code == ErrorCode.none


async def test_a_released_record_is_delivered_again(handlers):
    tid = await _opened(handlers)
    released = await _acknowledge(handlers, tid, 1, _acks(0, 1, RELEASE))
    again = await handlers.call("ShareFetch", 1, _share_fetch(tid, 2))
    assert released.responses[0].partitions[0].error_code == ErrorCode.none
    p = again.responses[0].partitions[0]
    assert values_of(p.records) == [b"a", b"b"]
    assert [(a.first_offset, a.last_offset, a.delivery_count) for a in p.acquired_records] == [
        (0, 1, 2)]
