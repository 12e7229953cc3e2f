"""Topic-level log configuration with Kafka's names, defaults and semantics."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

LONG_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10485760
    index_interval_bytes: int = 4096
    retention_ms: int = 604800000  # -1 = keep forever
    retention_bytes: int = -1
    cleanup_policy: str = "delete"  # "delete" | "compact" | "compact,delete"
    max_message_bytes: int = 1048588
    message_timestamp_type: str = "CreateTime"  # or "LogAppendTime"
    # How far a CreateTime timestamp may lag / lead the broker clock (LONG_MAX: unchecked).
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = LONG_MAX
    flush_messages: int = LONG_MAX  # LONG_MAX = leave flushing to the OS
    flush_ms: int = LONG_MAX
    delete_retention_ms: int = 86400000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    file_delete_delay_ms: int = 60000
    preallocate: bool = False

    # Kafka property name -> field name
    PROPERTY_NAMES = {
        "segment.bytes": "segment_bytes",
        "segment.ms": "segment_ms",
        "segment.jitter.ms": "segment_jitter_ms",
        "segment.index.bytes": "segment_index_bytes",
        "index.interval.bytes": "index_interval_bytes",
        "retention.ms": "retention_ms",
        "retention.bytes": "retention_bytes",
        "cleanup.policy": "cleanup_policy",
        "max.message.bytes": "max_message_bytes",
        "message.timestamp.type": "message_timestamp_type",
        "message.timestamp.before.max.ms": "message_timestamp_before_max_ms",
        "message.timestamp.after.max.ms": "message_timestamp_after_max_ms",
        "flush.messages": "flush_messages",
        "flush.ms": "flush_ms",
        "delete.retention.ms": "delete_retention_ms",
        "min.compaction.lag.ms": "min_compaction_lag_ms",
        "max.compaction.lag.ms": "max_compaction_lag_ms",
        "min.cleanable.dirty.ratio": "min_cleanable_dirty_ratio",
        "file.delete.delay.ms": "file_delete_delay_ms",
        "preallocate": "preallocate",
    }

    @classmethod
    def from_properties(cls, props: dict[str, Any], base: LogConfig | None = None) -> LogConfig:
        """Build from Kafka topic property names (typed values; numeric strings accepted).
        Unknown names are ignored; missing ones come from `base` (or the Kafka defaults)."""
        base = base or cls()
        changes: dict[str, Any] = {}
        types = {f.name: f.type for f in dataclasses.fields(cls)}
        for name, value in props.items():
            field = cls.PROPERTY_NAMES.get(name)
            if field is None or value is None:
                continue
            changes[field] = _coerce(types[field], value)
        internal_segment_bytes = props.get("internal.segment.bytes")
        if internal_segment_bytes is not None:  # Kafka's testing override of segment.bytes
            changes["segment_bytes"] = int(internal_segment_bytes)
        if "cleanup_policy" in changes:
            parts = sorted(p.strip().lower() for p in str(changes["cleanup_policy"]).split(","))
            changes["cleanup_policy"] = ",".join(p for p in parts if p)
        return dataclasses.replace(base, **changes)

    def to_properties(self) -> dict[str, Any]:
        return {name: getattr(self, field) for name, field in self.PROPERTY_NAMES.items()}

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy.split(",")

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy.split(",")

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"


def _coerce(type_name: Any, value: Any) -> Any:
    t = str(type_name)
    if t == "bool":
        return value if isinstance(value, bool) else str(value).lower() == "true"
    if t == "int":
        return int(value)
    if t == "float":
        return float(value)
    if isinstance(value, list | tuple):  # list-typed properties such as cleanup.policy
        return ",".join(str(v) for v in value)
    return str(value)
