"""Group coordinator properties: classic and consumer groups, and the offsets topic."""

from __future__ import annotations

from samsa.config.schema.property_def import G_GROUP, LS, SH, I, L, PropertyDef, S, prop
from samsa.config.schema.validators import ValidList, ValidString, at_least, between
from samsa.config.schema.values import INT_MAX

GROUPS: list[PropertyDef] = [
    prop("group.initial.rebalance.delay.ms", I, 3000, "Wait for more members before the first "
         "rebalance of an empty group.", group=G_GROUP),
    prop("group.min.session.timeout.ms", I, 6000, "Smallest session timeout a member may ask "
         "for.", group=G_GROUP),
    prop("group.max.session.timeout.ms", I, 1800000, "Largest session timeout a member may ask "
         "for.", group=G_GROUP),
    prop("group.max.size", I, INT_MAX, "Most members in one classic group.", at_least(1),
         group=G_GROUP),
    # Consumer-protocol (KIP-848) group settings: the coordinator's session timeout and
    # heartbeat interval, the defaults of the consumer.* group configs (DescribeConfigs of a
    # GROUP resource) and the bounds IncrementalAlterConfigs checks them against.
    prop("group.consumer.assignors", LS,
         ["org.apache.kafka.coordinator.group.assignor.UniformAssignor",
        "org.apache.kafka.coordinator.group.assignor.RangeAssignor"],
         "Server-side assignors of consumer groups (Kafka's class names, or their names uniform "
         "and range); the first is the default.", ValidList(("uniform", "range",
                              "org.apache.kafka.coordinator.group.assignor.UniformAssignor",
                              "org.apache.kafka.coordinator.group.assignor.RangeAssignor")),
         group=G_GROUP),
    prop("group.consumer.migration.policy", S, "bidirectional",
         "Online migration of a group with members between the classic and the consumer "
         "protocol: upgrade (a classic group becomes a consumer group when a consumer-protocol "
         "member joins), downgrade, bidirectional, or disabled.",
         ValidString(("disabled", "upgrade", "downgrade", "bidirectional")), group=G_GROUP),
    prop("group.consumer.max.size", I, INT_MAX, "Most members in one consumer group.",
         at_least(1), group=G_GROUP),
    prop("group.consumer.session.timeout.ms", I, 45000, "Default consumer.session.timeout.ms "
         "of a group.", at_least(1), group=G_GROUP),
    prop("group.consumer.min.session.timeout.ms", I, 45000, "Smallest consumer.session.timeout.ms "
         "a group may be configured with.", at_least(1), group=G_GROUP),
    prop("group.consumer.max.session.timeout.ms", I, 60000, "Largest consumer.session.timeout.ms "
         "a group may be configured with.", at_least(1), group=G_GROUP),
    prop("group.consumer.heartbeat.interval.ms", I, 5000, "Default "
         "consumer.heartbeat.interval.ms of a group.", at_least(1), group=G_GROUP),
    prop("group.consumer.min.heartbeat.interval.ms", I, 5000, "Smallest "
         "consumer.heartbeat.interval.ms a group may be configured with.", at_least(1),
         group=G_GROUP),
    prop("group.consumer.max.heartbeat.interval.ms", I, 15000, "Largest "
         "consumer.heartbeat.interval.ms a group may be configured with.", at_least(1),
         group=G_GROUP),
    prop("group.consumer.assignment.interval.ms", I, 1000, "Default "
         "consumer.assignment.interval.ms of a group.", at_least(0), group=G_GROUP),
    prop("group.consumer.min.assignment.interval.ms", I, 0, "Smallest "
         "consumer.assignment.interval.ms a group may be configured with.", at_least(0),
         group=G_GROUP),
    prop("group.consumer.max.assignment.interval.ms", I, 15000, "Largest "
         "consumer.assignment.interval.ms a group may be configured with.", at_least(0),
         group=G_GROUP),
]

OFFSETS: list[PropertyDef] = [
    prop("offsets.topic.num.partitions", I, 50, "Partitions of __consumer_offsets (fixed after "
         "creation).", at_least(1), group=G_GROUP),
    prop("offsets.topic.replication.factor", SH, 3, "Replication factor of __consumer_offsets.",
         at_least(1), group=G_GROUP),
    prop("offsets.topic.segment.bytes", I, 104857600, "Segment size of __consumer_offsets.",
         at_least(1), group=G_GROUP),
    prop("offsets.topic.compression.codec", I, 0, "Compression codec id for __consumer_offsets "
         "writes (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).", between(0, 4), group=G_GROUP),
    prop("offsets.load.buffer.size", I, 5242880, "Bytes read at a time when loading offsets (a "
         "larger batch is still read whole).", at_least(1), group=G_GROUP),
    prop("offsets.retention.minutes", I, 10080, "Committed offsets of an empty group expire after "
         "this.", at_least(1), group=G_GROUP),
    prop("offsets.retention.check.interval.ms", L, 600000, "How often expired offsets are "
         "removed.", at_least(1), group=G_GROUP),
    prop("offsets.commit.timeout.ms", I, 5000, "Most wait for an offset commit to be written.",
         at_least(1), group=G_GROUP),
    prop("offset.metadata.max.bytes", I, 4096, "Largest metadata string of an offset commit, in "
         "UTF-16 code units as Kafka counts them; longer ones get OFFSET_METADATA_TOO_LARGE.",
         group=G_GROUP),
]
