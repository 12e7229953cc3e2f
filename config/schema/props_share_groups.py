"""Share group properties: members, sessions, record locks, the share coordinator's state topic."""

from __future__ import annotations

from samsa.config.schema.property_def import G_GROUP, SH, I, PropertyDef, prop
from samsa.config.schema.validators import at_least, between

SHARE_GROUPS: list[PropertyDef] = [
    prop("group.share.max.size", I, 200, "Most members in one share group (KIP-932).",
         between(1, 1000), group=G_GROUP),
    prop("group.share.session.timeout.ms", I, 45000, "A share group member that sends no "
         "heartbeat for this long is removed from its group.", at_least(1), group=G_GROUP),
    prop("group.share.heartbeat.interval.ms", I, 5000, "How often share group members are asked "
         "to heartbeat.", at_least(1), group=G_GROUP),
    prop("group.share.record.lock.duration.ms", I, 30000, "How long a share group member holds "
         "the records it acquired before they are released for redelivery.",
         between(1000, 3600000), group=G_GROUP),
    prop("group.share.delivery.count.limit", I, 5, "Deliveries after which a share group's "
         "record that was released or whose lock expired is archived.", between(2, 10),
         group=G_GROUP),
]

SHARE_COORDINATOR: list[PropertyDef] = [
    prop("share.coordinator.state.topic.num.partitions", I, 50, "Partitions of "
         "__share_group_state, the share-group state topic (fixed after creation).",
         at_least(1), group=G_GROUP),
    prop("share.coordinator.state.topic.replication.factor", SH, 3, "Replication factor of "
         "__share_group_state (capped at the live brokers when it is created).", at_least(1),
         group=G_GROUP),
    prop("share.coordinator.state.topic.min.isr", SH, 2, "min.insync.replicas of "
         "__share_group_state (capped at the replication factor it is created with).",
         at_least(1), group=G_GROUP),
    prop("share.coordinator.state.topic.segment.bytes", I, 104857600, "Segment size of "
         "__share_group_state.", at_least(1), group=G_GROUP),
    prop("share.coordinator.state.topic.compression.codec", I, 0, "Compression codec id of "
         "__share_group_state writes (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).", between(0, 4),
         group=G_GROUP),
    prop("share.coordinator.load.buffer.size", I, 5242880, "Bytes read at a time when loading "
         "share-group state (a larger batch is still read whole).", at_least(1), group=G_GROUP),
    prop("share.coordinator.snapshot.update.records.per.snapshot", I, 500, "Update records the "
         "share coordinator writes for a share-partition between two snapshot records.",
         between(0, 500), group=G_GROUP),
    prop("share.coordinator.state.topic.prune.interval.ms", I, 300000, "How often the share "
         "coordinator deletes the records of __share_group_state that no share-partition's state "
         "needs any more.", at_least(1), group=G_GROUP),
    prop("share.coordinator.cold.partition.snapshot.interval.ms", I, 300000, "A share-partition "
         "whose last snapshot record is older than this gets a new one (so its old records can be "
         "pruned).", at_least(1), group=G_GROUP),
    prop("share.coordinator.write.timeout.ms", I, 5000, "How long the share coordinator waits for "
         "the replicas of __share_group_state to receive a write.", at_least(1), group=G_GROUP),
]
