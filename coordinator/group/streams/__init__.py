"""Streams groups (KIP-1071) in `__consumer_offsets`, beside the consumer and share groups:

- model.py: the group, its members, topology and tasks;
- records.py: their records (Kafka 4.4's StreamsGroup* records, types 17 to 23), written and
  replayed;
- topology.py: the topology against the cluster's topics (internal topics, task counts);
- assignor.py: the sticky task assignor (active tasks);
- transitions.py: StreamsGroupHeartbeat, leave and session timeout as I/O-free decisions that
  return records and an answer;
- groups.py: `StreamsGroups`, the coordinator's part that owns them (writes through the
  coordinator runtime, replays, sessions, describe, list).

The broker's side (the APIs, creating internal topics) is broker/handlers/streams_groups.py.
"""
