"""Share groups (KIP-932) in `__consumer_offsets`, beside the consumer groups (../consumer/):

- model.py: the group and its members, and Kafka's simple assignor;
- groups.py: `ShareGroups`, the coordinator's part that owns them (ShareGroupHeartbeat,
  ShareGroupDescribe, timers, loading);
- records.py: their records (Kafka's ShareGroup* records, on the consumer groups' layout).

The share-partitions' delivery state is the share-state coordinator's (coordinator/share/).
"""
