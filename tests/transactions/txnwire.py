"""Raw-protocol helpers for the transaction tests (WireClient over a real socket)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from samsa.protocol.records import build_batch, iter_batches, parse_control_record
from tests.protocol.wire import WireClient

PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3
INIT_PID, ADD_PARTITIONS, ADD_OFFSETS, END_TXN, WRITE_MARKERS = 22, 24, 25, 26, 27
DESCRIBE_PRODUCERS, DESCRIBE_TXNS, LIST_TXNS = 61, 65, 66

NONE = 0
CONCURRENT_TRANSACTIONS = 51
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
INVALID_PRODUCER_ID_MAPPING = 49
INVALID_TRANSACTION_TIMEOUT = 50
PRODUCER_FENCED = 90
TRANSACTIONAL_ID_NOT_FOUND = 105


class TxnWire(WireClient):
    def create_topic(self, topic: str) -> None:
        self.call(METADATA, 9, {"topics": [{"name": topic}], "allow_auto_topic_creation": True})

    def init_pid(
        self,
        txn_id: str | None,
        timeout_ms: int = 60000,
        version: int = 4,
        pid: int = -1,
        epoch: int = -1,
    ) -> Any:
        return self.call(
            INIT_PID,
            version,
            {
                "transactional_id": txn_id,
                "transaction_timeout": timeout_ms,
                "producer_id": pid,
                "producer_epoch": epoch,
            },
        )

    def init_until_ready(self, txn_id: str, timeout_ms: int = 60000, **kw: Any) -> Any:
        import time

        deadline = time.monotonic() + 15
        while True:
            r = self.init_pid(txn_id, timeout_ms, **kw)
            if r.error_code != CONCURRENT_TRANSACTIONS or time.monotonic() > deadline:
                return r
            time.sleep(0.05)

    def add_partitions(
        self, txn_id: str, pid: int, epoch: int, parts: list[tuple[str, int]], version: int = 3
    ) -> dict:
        topics: dict[str, list[int]] = {}
        for t, p in parts:
            topics.setdefault(t, []).append(p)
        r = self.call(
            ADD_PARTITIONS,
            version,
            {
                "v3_and_below_transactional_id": txn_id,
                "v3_and_below_producer_id": pid,
                "v3_and_below_producer_epoch": epoch,
                "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
            },
        )
        return {
            (t.name, p.partition_index): int(p.partition_error_code)
            for t in r.results_by_topic_v3_and_below
            for p in t.results_by_partition
        }

    def end_txn(self, txn_id: str, pid: int, epoch: int, commit: bool, version: int = 3) -> int:
        r = self.call(
            END_TXN,
            version,
            {
                "transactional_id": txn_id,
                "producer_id": pid,
                "producer_epoch": epoch,
                "committed": commit,
            },
        )
        return int(r.error_code)

    def produce(
        self,
        topic: str,
        partition: int,
        records: bytes,
        txn_id: str | None = None,
        version: int = 9,
    ) -> tuple[int, int]:
        r = self.call(
            PRODUCE,
            version,
            {
                "transactional_id": txn_id,
                "acks": -1,
                "timeout": 5000,
                "topic_data": [
                    {"name": topic, "partition_data": [{"index": partition, "records": records}]}
                ],
            },
        )
        part = r.responses[0].partition_responses[0]
        return int(part.error_code), part.base_offset

    def fetch(self, topic: str, partition: int, offset: int, isolation: int) -> Any:
        """One partition's fetch response, with the records of as many fetches as it takes to
        reach the LSO (read_committed) or HW (a fetch stops at a segment boundary)."""
        part = self._fetch_once(topic, partition, offset, isolation)
        records = part.records or b""
        limit = part.last_stable_offset if isolation else part.high_watermark
        aborted = list(part.aborted_transactions or [])
        while True:
            last = [h.next_offset for _, h in iter_batches(records)]
            nxt = last[-1] if last else offset
            if nxt >= limit:
                break
            more = self._fetch_once(topic, partition, nxt, isolation)
            if not more.records:
                break
            records += more.records
            aborted += [a for a in more.aborted_transactions or [] if a not in aborted]
        return _Fetched(
            part.high_watermark,
            part.last_stable_offset,
            records,
            None if part.aborted_transactions is None else aborted,
        )

    def _fetch_once(self, topic: str, partition: int, offset: int, isolation: int) -> Any:
        r = self.call(
            FETCH,
            11,
            {
                "max_wait": 0,
                "min_bytes": 0,
                "isolation_level": isolation,
                "topics": [
                    {
                        "topic": topic,
                        "partitions": [
                            {
                                "partition": partition,
                                "fetch_offset": offset,
                                "partition_max_bytes": 1 << 20,
                            }
                        ],
                    }
                ],
            },
        )
        return r.responses[0].partitions[0]

    def describe_txn(self, txn_id: str) -> Any:
        return self.call(DESCRIBE_TXNS, 0, {"transactional_ids": [txn_id]}).transaction_states[0]


@dataclass
class _Fetched:
    high_watermark: int
    last_stable_offset: int
    records: bytes
    aborted_transactions: list | None


def txn_batch(pid: int, epoch: int, seq: int, values: list[bytes]) -> bytes:
    now = int(time.time() * 1000)
    return build_batch(
        [(None, v, [], now) for v in values],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        transactional=True,
    )


def data_values(records: bytes | None) -> list[bytes]:
    """Values of the data (non-control) records."""
    from samsa.protocol.records import decode_records

    out = []
    for pos, h in iter_batches(records or b""):
        if not h.is_control:
            out += [r.value for r in decode_records(records, pos, h)]
    return out


@dataclass(frozen=True)
class Marker:
    offset: int
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int


def marker_batches(records: bytes | None) -> list[Marker]:
    """Every control batch, in log order."""
    out = []
    for pos, h in iter_batches(records or b""):
        if h.is_control:
            kind, coordinator_epoch = parse_control_record(records, pos, h)
            out.append(Marker(h.base_offset, h.producer_id, h.producer_epoch, kind == 1,
                              coordinator_epoch))
    return out


def markers(records: bytes | None) -> list[tuple[int, int, bool]]:
    """(producer id, epoch, commit) of every control batch."""
    return [(m.producer_id, m.producer_epoch, m.commit) for m in marker_batches(records)]


def committed_values(fetched: Any) -> list[bytes]:
    """What a read_committed consumer returns: data minus aborted transactions (the Java
    consumer's algorithm over AbortedTransactions and ABORT markers)."""
    from samsa.protocol.records import decode_records

    records = fetched.records or b""
    pending = sorted((a.first_offset, a.producer_id) for a in fetched.aborted_transactions or [])
    aborting: set[int] = set()
    out = []
    for pos, h in iter_batches(records):
        while pending and pending[0][0] <= h.last_offset:
            aborting.add(pending.pop(0)[1])
        if h.is_control:
            kind, _ = parse_control_record(records, pos, h)
            if kind == 0:
                aborting.discard(h.producer_id)
            continue
        if h.is_transactional and h.producer_id in aborting:
            continue
        out += [r.value for r in decode_records(records, pos, h)]
    return out
