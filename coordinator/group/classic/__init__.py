"""Classic groups (Kafka's classic protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup):

- model.py: a group, its members and committed offsets;
- groups.py: `ClassicGroups`, the coordinator's part that owns them (loading, persistence,
  SyncGroup, Heartbeat, LeaveGroup);
- join.py: JoinGroup;
- rebalance.py: the rebalance state machine and its timers.
"""
