"""Replication properties (Kafka's ReplicationConfigs)."""

from __future__ import annotations

from samsa.config.schema.property_def import (
    G_REPL,
    REPLICA_SELECTORS,
    B,
    I,
    L,
    PropertyDef,
    S,
    prop,
)
from samsa.config.schema.validators import ValidString, at_least
from samsa.config.schema.values import LONG_MAX

REPLICATION: list[PropertyDef] = [
    prop("default.replication.factor", I, 1, "Replication factor of auto-created topics.",
         group=G_REPL),
    prop("unclean.leader.election.enable", B, False, "Allow an out-of-sync replica to become "
         "leader.", topic="unclean.leader.election.enable", group=G_REPL),
    prop("replica.lag.time.max.ms", L, 30000, "A follower not caught up for this long leaves the "
         "ISR.", group=G_REPL),
    prop("replica.fetch.max.bytes", I, 1048576, "Bytes fetched per partition by followers.",
         at_least(0), group=G_REPL),
    prop("replica.fetch.wait.max.ms", I, 500, "Most wait of a follower fetch.", group=G_REPL),
    prop("replica.fetch.min.bytes", I, 1, "Least bytes for a follower fetch response.",
         group=G_REPL),
    prop("replica.fetch.response.max.bytes", I, 10485760, "Most bytes of a follower fetch "
         "response.", at_least(0), group=G_REPL),
    prop("replica.high.watermark.checkpoint.interval.ms", L, 5000, "How often high watermarks "
         "are checkpointed.", group=G_REPL),
    prop("num.replica.fetchers", I, 1, "Follower fetcher threads.", group=G_REPL,
         ignored="a follower runs one fetcher per leader broker"),
    prop("leader.replication.throttled.rate", L, LONG_MAX, "Bytes per second a leader sends "
         "to out-of-sync followers of the replicas its topics list in "
         "leader.replication.throttled.replicas (usually set as a dynamic broker config, as "
         "kafka-reassign-partitions --throttle does).", at_least(0), group=G_REPL),
    prop("follower.replication.throttled.rate", L, LONG_MAX, "Bytes per second a follower "
         "fetches for the out-of-sync replicas its topics list in "
         "follower.replication.throttled.replicas (usually set as a dynamic broker config, "
         "as kafka-reassign-partitions --throttle does).", at_least(0), group=G_REPL),
    prop("replica.alter.log.dirs.io.max.bytes.per.second", L, LONG_MAX, "Bytes per second "
         "moved between the log directories of one broker (AlterReplicaLogDirs).", at_least(0),
         group=G_REPL),
    prop("replica.selector.class", S, None, "How a partition leader picks the replica a "
         "consumer should fetch from (KIP-392): unset or "
         "org.apache.kafka.common.replica.LeaderSelector, the leader; "
         "org.apache.kafka.common.replica.RackAwareReplicaSelector, an in-sync replica in the "
         "consumer's rack (its client.rack), told in the Fetch response's preferred read "
         "replica. While it is set, followers serve consumers' fetches (v11+) up to their "
         "high watermark.", ValidString(REPLICA_SELECTORS), group=G_REPL),
    prop("replication.quota.window.num", I, 11, "The number of samples a replication "
         "throttle's rate is measured over.", at_least(1), group=G_REPL),
    prop("replication.quota.window.size.seconds", I, 1, "The time span of each sample of a "
         "replication throttle.", at_least(1), group=G_REPL),
    prop("auto.leader.rebalance.enable", B, True, "The controller moves leadership back to "
         "preferred replicas when a broker's leader imbalance exceeds "
         "leader.imbalance.per.broker.percentage.", group=G_REPL),
    prop("leader.imbalance.check.interval.seconds", L, 300, "How often the controller checks "
         "the leader imbalance.", at_least(1), group=G_REPL),
    prop("leader.imbalance.per.broker.percentage", I, 10, "Share (percent) of a broker's "
         "preferred partitions led elsewhere above which the controller rebalances them.",
         group=G_REPL),
]
