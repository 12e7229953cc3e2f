"""The dispatch table: which APIs and versions this broker serves, and their handlers.

Each range is the versions this broker implements fully, within what Kafka's own message
schemas define (clients/src/main/resources/common/message/*.json, which kio is generated
from); an API appears here only when its handler exists. broker/handlers/requests.py names the
kio request classes of exactly these versions, for the handlers' types.
"""

from __future__ import annotations

from samsa.protocol.registry import ApiRegistry

from .context import RequestContext
from .handlers import (
    acls,
    client_quotas,
    cluster,
    configs,
    consumer_groups,
    controlled_shutdown,
    describe_topic_partitions,
    elections,
    features,
    fetch,
    find_coordinator,
    groups,
    log_dirs,
    metadata,
    offsets,
    offsets_commit,
    produce,
    reassignments,
    sasl,
    scram_credentials,
    share_fetch,
    share_groups,
    share_offsets,
    share_state,
    topics,
    transactions,
)
from .handlers.api_versions import make_handler


def build_registry() -> ApiRegistry[RequestContext]:
    r = ApiRegistry[RequestContext]()
    # Produce: accept v3+ (magic 2 only), advertise from v0 like Kafka 4 (KAFKA-18659).
    r.register(0, "Produce", (3, 13), produce.handle_produce, advertised_min=0)
    r.register(1, "Fetch", (4, 17), fetch.handle_fetch)
    r.register(2, "ListOffsets", (1, 11), offsets.handle_list_offsets)
    r.register(3, "Metadata", (0, 13), metadata.handle_metadata)
    r.register(18, "ApiVersions", (0, 4), make_handler(r))
    # SASL (broker/security/sasl.py gates a SASL listener's connections until they pass)
    r.register(17, "SaslHandshake", (0, 1), sasl.handle_sasl_handshake)
    r.register(36, "SaslAuthenticate", (0, 2), sasl.handle_sasl_authenticate)
    # ACLs (broker/security/authorizer.py; SECURITY_DISABLED without authorizer.class.name)
    r.register(29, "DescribeAcls", (1, 3), acls.handle_describe_acls)
    r.register(30, "CreateAcls", (1, 3), acls.handle_create_acls)
    r.register(31, "DeleteAcls", (1, 3), acls.handle_delete_acls)
    r.register(50, "DescribeUserScramCredentials", (0, 0),
               scram_credentials.handle_describe_user_scram_credentials)
    r.register(51, "AlterUserScramCredentials", (0, 0),
               scram_credentials.handle_alter_user_scram_credentials)
    # group coordinator (coordinator/group): classic groups and committed offsets
    r.register(8, "OffsetCommit", (2, 10), offsets_commit.handle_offset_commit)
    r.register(9, "OffsetFetch", (1, 10), offsets_commit.handle_offset_fetch)
    r.register(10, "FindCoordinator", (0, 6), find_coordinator.handle_find_coordinator)
    r.register(11, "JoinGroup", (0, 9), groups.handle_join_group)
    r.register(12, "Heartbeat", (0, 4), groups.handle_heartbeat)
    r.register(13, "LeaveGroup", (0, 5), groups.handle_leave_group)
    r.register(14, "SyncGroup", (0, 5), groups.handle_sync_group)
    r.register(15, "DescribeGroups", (0, 5), groups.handle_describe_groups)
    r.register(16, "ListGroups", (0, 5), groups.handle_list_groups)
    r.register(28, "TxnOffsetCommit", (0, 5), offsets_commit.handle_txn_offset_commit)
    r.register(42, "DeleteGroups", (0, 2), groups.handle_delete_groups)
    r.register(47, "OffsetDelete", (0, 0), offsets_commit.handle_offset_delete)
    # consumer-protocol groups (KIP-848): advertised while group.version >= 1 (features.py)
    r.register(68, "ConsumerGroupHeartbeat", (0, 1),
               consumer_groups.handle_consumer_group_heartbeat)
    r.register(69, "ConsumerGroupDescribe", (0, 1),
               consumer_groups.handle_consumer_group_describe)
    # share groups (KIP-932): advertised while share.version >= 1 (features.py)
    r.register(76, "ShareGroupHeartbeat", (1, 1), share_groups.handle_share_group_heartbeat)
    r.register(77, "ShareGroupDescribe", (1, 1), share_groups.handle_share_group_describe)
    # v2: renew acknowledgements (KIP-1222); both acquire modes never exceed MaxRecords
    r.register(78, "ShareFetch", (1, 2), share_fetch.handle_share_fetch)
    r.register(79, "ShareAcknowledge", (1, 2), share_fetch.handle_share_acknowledge)
    r.register(90, "DescribeShareGroupOffsets", (0, 0),
               share_offsets.handle_describe_share_group_offsets)
    r.register(91, "AlterShareGroupOffsets", (0, 0),
               share_offsets.handle_alter_share_group_offsets)
    r.register(92, "DeleteShareGroupOffsets", (0, 0),
               share_offsets.handle_delete_share_group_offsets)
    # the share coordinator's persister APIs, between brokers (CLUSTER_ACTION), same gate
    r.register(83, "InitializeShareGroupState", (0, 0),
               share_state.handle_initialize_share_group_state)
    r.register(84, "ReadShareGroupState", (0, 0), share_state.handle_read_share_group_state)
    r.register(85, "WriteShareGroupState", (0, 0), share_state.handle_write_share_group_state)
    r.register(86, "DeleteShareGroupState", (0, 0),
               share_state.handle_delete_share_group_state)
    r.register(87, "ReadShareGroupStateSummary", (0, 0),
               share_state.handle_read_share_group_state_summary)
    r.register(19, "CreateTopics", (2, 7), topics.handle_create_topics)
    r.register(20, "DeleteTopics", (1, 6), topics.handle_delete_topics)
    r.register(21, "DeleteRecords", (0, 2), offsets.handle_delete_records)
    r.register(22, "InitProducerId", (0, 5), transactions.handle_init_producer_id)
    r.register(23, "OffsetForLeaderEpoch", (2, 4), offsets.handle_offset_for_leader_epoch)
    r.register(24, "AddPartitionsToTxn", (0, 5), transactions.handle_add_partitions_to_txn)
    r.register(25, "AddOffsetsToTxn", (0, 4), transactions.handle_add_offsets_to_txn)
    r.register(26, "EndTxn", (0, 5), transactions.handle_end_txn)
    r.register(27, "WriteTxnMarkers", (1, 2), transactions.handle_write_txn_markers)
    r.register(32, "DescribeConfigs", (1, 4), configs.handle_describe_configs)
    r.register(33, "AlterConfigs", (0, 2), configs.handle_alter_configs)
    r.register(34, "AlterReplicaLogDirs", (1, 2), log_dirs.handle_alter_replica_log_dirs)
    r.register(35, "DescribeLogDirs", (1, 4), log_dirs.handle_describe_log_dirs)
    r.register(37, "CreatePartitions", (0, 3), topics.handle_create_partitions)
    r.register(43, "ElectLeaders", (0, 2), elections.handle_elect_leaders)
    r.register(45, "AlterPartitionReassignments", (0, 1),
               reassignments.handle_alter_partition_reassignments)
    r.register(46, "ListPartitionReassignments", (0, 0),
               reassignments.handle_list_partition_reassignments)
    # between brokers only: served, not advertised (Kafka 4 has no such API)
    r.register(7, "ControlledShutdown", (1, 3), controlled_shutdown.handle_controlled_shutdown,
               advertised=False)
    r.register(44, "IncrementalAlterConfigs", (0, 1), configs.handle_incremental_alter_configs)
    r.register(48, "DescribeClientQuotas", (0, 1), client_quotas.handle_describe_client_quotas)
    r.register(49, "AlterClientQuotas", (0, 1), client_quotas.handle_alter_client_quotas)
    r.register(57, "UpdateFeatures", (0, 2), features.handle_update_features)
    r.register(60, "DescribeCluster", (0, 1), cluster.handle_describe_cluster)
    r.register(61, "DescribeProducers", (0, 0), transactions.handle_describe_producers)
    r.register(65, "DescribeTransactions", (0, 0), transactions.handle_describe_transactions)
    r.register(66, "ListTransactions", (0, 1), transactions.handle_list_transactions)
    r.register(75, "DescribeTopicPartitions", (0, 0),
               describe_topic_partitions.handle_describe_topic_partitions)
    return r
