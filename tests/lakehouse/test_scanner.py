"""What the Iceberg writer takes from a partition's log: committed records only, and commits
that end where no transaction is open, so that a transaction is never split across two."""

from __future__ import annotations

from samsa.broker.lakehouse.scanner import Scanner
from samsa.protocol.records import build_batch, build_control_batch


def data(offset: int, key: bytes, producer_id: int = -1) -> bytes:
    return build_batch([(key, b"v")], offset, producer_id=producer_id, producer_epoch=0,
                       base_sequence=0 if producer_id >= 0 else -1,
                       transactional=producer_id >= 0)


def marker(offset: int, producer_id: int, commit: bool) -> bytes:
    return build_control_batch(producer_id, 0, commit, 0, 0, base_offset=offset)


def keys(scanner: Scanner) -> list[bytes | None]:
    return [r.key for r in scanner.ready]


# plain record, T1 (pid 1) and T2 (pid 2) interleaved, T2 commits, T1 aborts, T3 left open
LOG = [data(0, b"plain", -1), data(1, b"t1", 1), data(2, b"t2", 2), marker(3, 2, True),
       marker(4, 1, False), data(5, b"t3", 3)]


def test_committed_records_up_to_where_no_transaction_is_open() -> None:
    s = Scanner(0)
    s.feed(b"".join(LOG))
    assert keys(s) == [b"plain", b"t2"]
    assert s.safe == 5  # T3, still open, is read again by the next commit
    assert s.position == 6


def test_a_transaction_committed_while_another_is_open_waits_for_it() -> None:
    s = Scanner(0)
    s.feed(b"".join(LOG[:4]))  # T2 has committed, T1 is still open
    assert keys(s) == [b"plain"]
    assert s.safe == 1


def test_a_scan_starting_at_the_safe_point_finds_the_rest() -> None:
    s = Scanner(5)
    s.feed(b"".join(LOG[5:]) + marker(6, 3, True))
    assert keys(s) == [b"t3"]
    assert s.safe == 7


def test_batches_before_the_start_are_skipped() -> None:
    s = Scanner(3)  # a read returns whole batches from before the offset asked for
    s.feed(b"".join(LOG))
    assert keys(s) == []
    assert s.safe == 5
