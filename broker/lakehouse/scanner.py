"""Which records of a partition's log go into its Iceberg table: the committed ones, in whole
transactions.

The scanner is fed the log's batches in order, up to the last stable offset. It keeps the
records of each open transaction aside until its marker: a COMMIT releases them, an ABORT
drops them; control batches carry no rows. `safe` is the end of the last batch after which no
transaction was open: a commit covers the records before it, so each Kafka transaction lands in
one Iceberg commit, and the next scan, which starts there, never sees half of a transaction."""

from __future__ import annotations

from dataclasses import dataclass, field

from samsa.protocol.records import (
    CONTROL_COMMIT,
    Buf,
    Record,
    decode_records,
    iter_batches,
    parse_control_record,
)


@dataclass
class Scanner:
    start: int  # the offset the scan starts at, where no transaction is open
    safe: int = -1  # rows in `ready` cover the log up to here (exclusive)
    position: int = -1  # the end of the last batch fed
    ready: list[Record] = field(default_factory=list)
    _pending: list[Record] = field(default_factory=list)  # done, but a transaction is open
    _open: dict[int, list[Record]] = field(default_factory=dict)  # producer id -> its records

    def __post_init__(self) -> None:
        self.safe = self.position = self.start

    def feed(self, buf: Buf) -> None:
        for pos, header in iter_batches(buf):
            end = header.base_offset + header.last_offset_delta + 1
            if end <= self.position:  # a batch the scan has seen (a read may start in it)
                continue
            if header.is_control:
                ctype, _ = parse_control_record(buf, pos, header)
                rows = self._open.pop(header.producer_id, [])
                if ctype == CONTROL_COMMIT:
                    self._pending.extend(rows)
            elif header.is_transactional:
                self._open.setdefault(header.producer_id, []).extend(
                    r for r in decode_records(buf, pos, header) if r.offset >= self.start)
            else:
                self._pending.extend(
                    r for r in decode_records(buf, pos, header) if r.offset >= self.start)
            self.position = end
            if not self._open:
                self.ready.extend(self._pending)
                self._pending.clear()
                self.safe = end
