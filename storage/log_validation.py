"""What an append checks before anything is written (Kafka's LogValidator, as the log uses it).

`BatchValidator` belongs to one `Log`: `analyze` splits a record set into its batches and
refuses it (size limits, partial or corrupt batches, a producer's second batch) before any
offset is assigned; `validate_client_batch` is LogValidator's check of one producer batch,
shared by the general append and the one-batch fast path."""

from __future__ import annotations

from samsa.protocol.compression import records_limit
from samsa.protocol.records import (
    ATTR_TIMESTAMP_TYPE,
    BatchHeader,
    Buf,
    inflated_ahead,
    iter_batches,
    release_inflated,
    validate_batch,
)
from samsa.storage.clock import milliseconds
from samsa.storage.config import LogConfig
from samsa.storage.errors import CorruptRecord, InvalidRecord, MessageTooLarge, RecordListTooLarge
from samsa.storage.record_validation import has_record_rules, validate_records


class BatchValidator:
    def __init__(self, partition: str) -> None:
        self.partition = partition  # `<topic>-<partition>`, named in refusals
        self._rules_of: LogConfig | None = None  # has_record_rules' config and answer
        self._rules = True

    def analyze(self, config: LogConfig, buf: Buf, client: bool,
                now_ms: int | None = None) -> list[tuple[int, BatchHeader]]:
        """The batches of `buf` (position, header), each checked; a client's records only
        when it sent one batch (more are refused below without inflating any)."""
        if not buf:
            raise InvalidRecord("empty record set")
        batches = list(iter_batches(buf))
        consumed = batches[-1][0] + batches[-1][1].size if batches else 0
        if consumed != len(buf):
            raise CorruptRecord("record set ends with a partial batch")
        one_from_client = client and len(batches) == 1
        for pos, h in batches:
            if h.size > config.max_message_bytes:
                raise MessageTooLarge(
                    f"batch of {h.size} bytes exceeds max.message.bytes "
                    f"{config.max_message_bytes}")
            if one_from_client:
                self.validate_client_batch(config, buf, pos, h, now_ms)
            else:  # a client's batches are refused below without their records inflated
                validate_batch(buf, pos, h)
        if client and len(batches) > 1:  # LogValidator: one v2 batch per partition and request
            raise InvalidRecord("Compressed outer record has more than one batch")
        if len(buf) > config.segment_bytes:
            raise RecordListTooLarge(
                f"record set of {len(buf)} bytes exceeds segment.bytes {config.segment_bytes}")
        return batches

    def validate_client_batch(self, config: LogConfig, buf: Buf, pos: int, h: BatchHeader,
                              now_ms: int | None) -> None:
        """LogValidator's checks of a producer's batch; a compressed one may have been
        inflated and checked ahead of the append, off the event loop (inflated_ahead), its
        records inflated to at most records_limit(max.message.bytes)."""
        if not h.compression:  # nothing inflated ahead; the record rules only if any apply
            validate_batch(buf, pos, h, client=True)
            if h.attributes & ATTR_TIMESTAMP_TYPE or self._has_record_rules(config):
                validate_records(buf, pos, h, config, self.partition,
                                 milliseconds() if now_ms is None else now_ms)
            return
        partition = self.partition
        ahead = inflated_ahead(partition, buf, pos, h) if h.compression else None
        try:
            validate_batch(buf, pos, h, client=True,
                           limit=records_limit(config.max_message_bytes), inflated=ahead)
            if ahead is not None and ahead.rules_checked:
                if ahead.rules_error is not None:
                    raise ahead.rules_error.with_traceback(None)
                return
            validate_records(buf, pos, h, config, partition,
                             milliseconds() if now_ms is None else now_ms,
                             None if ahead is None else ahead.records)
        finally:
            if ahead is not None:
                release_inflated(partition, h)

    def _has_record_rules(self, config: LogConfig) -> bool:
        """Whether `config` gives `validate_records` anything to check in a batch with
        CreateTime timestamps (worked out once per config: it is asked every append)."""
        if self._rules_of is not config:
            self._rules_of, self._rules = config, has_record_rules(config)
        return self._rules


__all__ = ["BatchValidator"]
