"""Log properties (Kafka's ServerLogConfigs)."""

from __future__ import annotations

from samsa.config.schema.property_def import (
    G_LOG,
    LS,
    NO_TIERED_STORAGE,
    B,
    I,
    L,
    PropertyDef,
    S,
    prop,
)
from samsa.config.schema.validators import ValidList, ValidString, at_least
from samsa.config.schema.values import LONG_MAX

LOG: list[PropertyDef] = [
    prop("num.partitions", I, 1, "Partitions of an auto-created topic, or of CreateTopics with "
         "num_partitions -1.", at_least(1), group=G_LOG),
    prop("log.dir", S, "./data", "Data directory, used when log.dirs is not set.",
         kafka="/tmp/kafka-logs", group=G_LOG),
    prop("log.dirs", S, None, "Comma-separated data directories; overrides log.dir. A new "
         "partition goes to the one holding the fewest partitions.", group=G_LOG),
    prop("log.segment.bytes", I, 1073741824, "Largest size of one segment file.", at_least(14),
         topic="segment.bytes", group=G_LOG),
    prop("log.roll.ms", L, None, "Roll a new segment after this long; if unset log.roll.hours "
         "is used.", topic="segment.ms", group=G_LOG),
    prop("log.roll.hours", I, 168, "Roll a new segment after this many hours (secondary to "
         "log.roll.ms).", at_least(1), group=G_LOG),
    prop("log.roll.jitter.ms", L, None, "Most random jitter subtracted from the roll time; if "
         "unset log.roll.jitter.hours is used.", topic="segment.jitter.ms", group=G_LOG),
    prop("log.roll.jitter.hours", I, 0, "Roll jitter in hours (secondary to log.roll.jitter.ms).",
         at_least(0), group=G_LOG),
    prop("log.retention.ms", L, None, "Delete segments older than this; -1 keeps forever; if "
         "unset log.retention.minutes is used.", topic="retention.ms", group=G_LOG),
    prop("log.retention.minutes", I, None, "Retention in minutes (secondary to "
         "log.retention.ms); if unset log.retention.hours is used.", group=G_LOG),
    prop("log.retention.hours", I, 168, "Retention in hours (tertiary to log.retention.ms).",
         group=G_LOG),
    prop("log.retention.bytes", L, -1, "Delete old segments while a partition is larger than "
         "this; -1 means no size limit.", topic="retention.bytes", group=G_LOG),
    prop("log.retention.check.interval.ms", L, 300000, "How often retention is enforced.",
         at_least(1), group=G_LOG),
    prop("log.cleanup.policy", LS, ["delete"], "Default cleanup policy: delete, compact or both.",
         ValidList(("compact", "delete")), topic="cleanup.policy", group=G_LOG),
    prop("log.index.size.max.bytes", I, 10485760, "Largest size of an offset/time index file.",
         at_least(4), topic="segment.index.bytes", group=G_LOG),
    prop("log.index.interval.bytes", I, 4096, "Bytes of log between two offset-index entries.",
         at_least(0), topic="index.interval.bytes", group=G_LOG),
    prop("log.flush.interval.messages", L, LONG_MAX, "fsync a partition after this many "
         "messages.", at_least(1), topic="flush.messages", group=G_LOG),
    prop("log.flush.interval.ms", L, None, "fsync a partition when its oldest unflushed message "
         "is this old; if unset log.flush.scheduler.interval.ms is used.", topic="flush.ms",
         group=G_LOG),
    prop("log.flush.scheduler.interval.ms", L, LONG_MAX, "How often the flusher checks whether a "
         "log needs an fsync.", group=G_LOG),
    prop("log.flush.offset.checkpoint.interval.ms", I, 60000, "How often the recovery-point "
         "checkpoint is written.", at_least(0), group=G_LOG),
    prop("log.flush.start.offset.checkpoint.interval.ms", I, 60000, "How often the log-start-"
         "offset checkpoint is written.", at_least(0), group=G_LOG),
    prop("log.segment.delete.delay.ms", L, 60000, "Wait this long before deleting a removed "
         "segment's files.", at_least(0), topic="file.delete.delay.ms", group=G_LOG),
    prop("log.preallocate", B, False, "Preallocate segment files at creation.",
         topic="preallocate", group=G_LOG),
    prop("log.message.timestamp.type", S, "CreateTime", "Record timestamps are the producer's "
         "(CreateTime) or the broker's (LogAppendTime).", ValidString(("CreateTime",
         "LogAppendTime")), topic="message.timestamp.type", group=G_LOG),
    prop("log.message.timestamp.before.max.ms", L, LONG_MAX, "How far a CreateTime timestamp may "
         "lag the broker clock; an older record fails its batch with "
         "INVALID_TIMESTAMP.", at_least(0), topic="message.timestamp.before.max.ms", group=G_LOG),
    prop("log.message.timestamp.after.max.ms", L, LONG_MAX, "How far a CreateTime timestamp may "
         "lead the broker clock; a later record fails its batch with "
         "INVALID_TIMESTAMP.", at_least(0), topic="message.timestamp.after.max.ms", group=G_LOG),
    prop("log.local.retention.ms", L, -2, "Local retention with tiered storage; -2 follows "
         "retention.ms.", at_least(-2), topic="local.retention.ms", group=G_LOG,
         ignored=NO_TIERED_STORAGE),
    prop("log.local.retention.bytes", L, -2, "Local retention bytes with tiered storage; -2 "
         "follows retention.bytes.", at_least(-2), topic="local.retention.bytes", group=G_LOG,
         ignored=NO_TIERED_STORAGE),
    prop("num.recovery.threads.per.data.dir", I, 1, "Threads recovering logs at start-up.",
         at_least(1), group=G_LOG, ignored="recovery and shutdown flushes use a fixed pool of "
         "8 threads"),
    prop("min.insync.replicas", I, 1, "Replicas that must acknowledge an acks=all write.",
         at_least(1), topic="min.insync.replicas", group=G_LOG),
]
