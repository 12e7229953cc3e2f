"""Log cleaner properties (Kafka's CleanerConfig)."""

from __future__ import annotations

from samsa.config.schema.property_def import G_CLEANER, KEY_MAP_GROWS, B, D, I, L, PropertyDef, prop
from samsa.config.schema.validators import at_least, between
from samsa.config.schema.values import LONG_MAX

CLEANER: list[PropertyDef] = [
    prop("log.cleaner.enable", B, True, "Run the log cleaner; when false compacted topics are "
         "not cleaned.", group=G_CLEANER),
    prop("log.cleaner.threads", I, 1, "Cleaner threads.", at_least(0), group=G_CLEANER,
         ignored="one cleaner compacts one log at a time"),
    prop("log.cleaner.backoff.ms", L, 15000, "How often the cleaner looks for a log to clean.",
         at_least(0), group=G_CLEANER),
    prop("log.cleaner.dedupe.buffer.size", L, 134217728, "Memory for the cleaner's key map.",
         group=G_CLEANER, ignored=KEY_MAP_GROWS),
    prop("log.cleaner.io.buffer.size", I, 524288, "Cleaner I/O buffer memory.", at_least(0),
         group=G_CLEANER, ignored="the cleaner has no fixed-size I/O buffers"),
    prop("log.cleaner.io.buffer.load.factor", D, 0.9, "Load factor of the cleaner's key map.",
         group=G_CLEANER, ignored=KEY_MAP_GROWS),
    prop("log.cleaner.io.max.bytes.per.second", D, 1.7976931348623157e308, "Cleaner I/O "
         "throttle.", group=G_CLEANER, ignored="cleaner I/O is not throttled"),
    prop("log.cleaner.min.cleanable.ratio", D, 0.5, "Least dirty/total ratio before a log is "
         "cleaned.", between(0, 1), topic="min.cleanable.dirty.ratio", group=G_CLEANER),
    prop("log.cleaner.delete.retention.ms", L, 86400000, "How long tombstones are kept in "
         "compacted topics.", at_least(0), topic="delete.retention.ms", group=G_CLEANER),
    prop("log.cleaner.min.compaction.lag.ms", L, 0, "Least age before a record may be "
         "compacted.", at_least(0), topic="min.compaction.lag.ms", group=G_CLEANER),
    prop("log.cleaner.max.compaction.lag.ms", L, LONG_MAX, "Most age before a record must be "
         "eligible for compaction.", at_least(1), topic="max.compaction.lag.ms",
         group=G_CLEANER),
]
