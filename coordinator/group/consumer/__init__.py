"""Consumer-protocol (KIP-848) consumer groups, in the pieces of Kafka's group coordinator:

- model.py: the group and its members (ConsumerGroup, ConsumerGroupMember), epochs;
- heartbeat.py: ConsumerGroupHeartbeat, step by step (GroupMetadataManager);
- target.py: the target assignment (TargetAssignmentBuilder), by assignors.py's assignors;
- reconciliation.py: a member toward its target (CurrentAssignmentBuilder);
- records.py: their __consumer_offsets records and the records a change writes
  (GroupCoordinatorRecordHelpers);
- groups.py: `ConsumerGroups`, the coordinator's part that owns the groups (state, timers,
  loading, describe/list/delete);
- migration.py: `ConsumerMigration`, online migration from and to classic groups.
"""
