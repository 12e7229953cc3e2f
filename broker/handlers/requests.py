"""The request types each handler serves: per API, the union of the request classes (kio's,
protocol/controlled_shutdown.py's) of the versions its handler module declares (`@api`), and the
version families and nested structs it declares.

Written by `python -m samsa.broker.handlers.request_types` from those declarations: do not edit.
Only for the type checker: handlers import these names under `TYPE_CHECKING`, so serving a
request never loads the schema modules of versions nobody asked for.
"""

from __future__ import annotations

from typing import TypeAlias

import kio.schema.add_offsets_to_txn.v0.request as add_offsets_to_txn_v0
import kio.schema.add_offsets_to_txn.v1.request as add_offsets_to_txn_v1
import kio.schema.add_offsets_to_txn.v2.request as add_offsets_to_txn_v2
import kio.schema.add_offsets_to_txn.v3.request as add_offsets_to_txn_v3
import kio.schema.add_offsets_to_txn.v4.request as add_offsets_to_txn_v4
import kio.schema.add_partitions_to_txn.v0.request as add_partitions_to_txn_v0
import kio.schema.add_partitions_to_txn.v1.request as add_partitions_to_txn_v1
import kio.schema.add_partitions_to_txn.v2.request as add_partitions_to_txn_v2
import kio.schema.add_partitions_to_txn.v3.request as add_partitions_to_txn_v3
import kio.schema.add_partitions_to_txn.v4.request as add_partitions_to_txn_v4
import kio.schema.add_partitions_to_txn.v5.request as add_partitions_to_txn_v5
import kio.schema.alter_client_quotas.v0.request as alter_client_quotas_v0
import kio.schema.alter_client_quotas.v1.request as alter_client_quotas_v1
import kio.schema.alter_configs.v0.request as alter_configs_v0
import kio.schema.alter_configs.v1.request as alter_configs_v1
import kio.schema.alter_configs.v2.request as alter_configs_v2
import kio.schema.alter_partition_reassignments.v0.request as alter_partition_reassignments_v0
import kio.schema.alter_partition_reassignments.v1.request as alter_partition_reassignments_v1
import kio.schema.alter_replica_log_dirs.v1.request as alter_replica_log_dirs_v1
import kio.schema.alter_replica_log_dirs.v2.request as alter_replica_log_dirs_v2
import kio.schema.alter_share_group_offsets.v0.request as alter_share_group_offsets_v0
import kio.schema.alter_user_scram_credentials.v0.request as alter_user_scram_credentials_v0
import kio.schema.api_versions.v0.request as api_versions_v0
import kio.schema.api_versions.v1.request as api_versions_v1
import kio.schema.api_versions.v2.request as api_versions_v2
import kio.schema.api_versions.v3.request as api_versions_v3
import kio.schema.api_versions.v4.request as api_versions_v4
import kio.schema.consumer_group_describe.v0.request as consumer_group_describe_v0
import kio.schema.consumer_group_describe.v1.request as consumer_group_describe_v1
import kio.schema.consumer_group_heartbeat.v0.request as consumer_group_heartbeat_v0
import kio.schema.consumer_group_heartbeat.v1.request as consumer_group_heartbeat_v1
import kio.schema.create_acls.v1.request as create_acls_v1
import kio.schema.create_acls.v2.request as create_acls_v2
import kio.schema.create_acls.v3.request as create_acls_v3
import kio.schema.create_partitions.v0.request as create_partitions_v0
import kio.schema.create_partitions.v1.request as create_partitions_v1
import kio.schema.create_partitions.v2.request as create_partitions_v2
import kio.schema.create_partitions.v3.request as create_partitions_v3
import kio.schema.create_topics.v2.request as create_topics_v2
import kio.schema.create_topics.v3.request as create_topics_v3
import kio.schema.create_topics.v4.request as create_topics_v4
import kio.schema.create_topics.v5.request as create_topics_v5
import kio.schema.create_topics.v6.request as create_topics_v6
import kio.schema.create_topics.v7.request as create_topics_v7
import kio.schema.delete_acls.v1.request as delete_acls_v1
import kio.schema.delete_acls.v2.request as delete_acls_v2
import kio.schema.delete_acls.v3.request as delete_acls_v3
import kio.schema.delete_groups.v0.request as delete_groups_v0
import kio.schema.delete_groups.v1.request as delete_groups_v1
import kio.schema.delete_groups.v2.request as delete_groups_v2
import kio.schema.delete_records.v0.request as delete_records_v0
import kio.schema.delete_records.v1.request as delete_records_v1
import kio.schema.delete_records.v2.request as delete_records_v2
import kio.schema.delete_share_group_offsets.v0.request as delete_share_group_offsets_v0
import kio.schema.delete_share_group_state.v0.request as delete_share_group_state_v0
import kio.schema.delete_topics.v1.request as delete_topics_v1
import kio.schema.delete_topics.v2.request as delete_topics_v2
import kio.schema.delete_topics.v3.request as delete_topics_v3
import kio.schema.delete_topics.v4.request as delete_topics_v4
import kio.schema.delete_topics.v5.request as delete_topics_v5
import kio.schema.delete_topics.v6.request as delete_topics_v6
import kio.schema.describe_acls.v1.request as describe_acls_v1
import kio.schema.describe_acls.v2.request as describe_acls_v2
import kio.schema.describe_acls.v3.request as describe_acls_v3
import kio.schema.describe_client_quotas.v0.request as describe_client_quotas_v0
import kio.schema.describe_client_quotas.v1.request as describe_client_quotas_v1
import kio.schema.describe_cluster.v0.request as describe_cluster_v0
import kio.schema.describe_cluster.v1.request as describe_cluster_v1
import kio.schema.describe_configs.v1.request as describe_configs_v1
import kio.schema.describe_configs.v2.request as describe_configs_v2
import kio.schema.describe_configs.v3.request as describe_configs_v3
import kio.schema.describe_configs.v4.request as describe_configs_v4
import kio.schema.describe_groups.v0.request as describe_groups_v0
import kio.schema.describe_groups.v1.request as describe_groups_v1
import kio.schema.describe_groups.v2.request as describe_groups_v2
import kio.schema.describe_groups.v3.request as describe_groups_v3
import kio.schema.describe_groups.v4.request as describe_groups_v4
import kio.schema.describe_groups.v5.request as describe_groups_v5
import kio.schema.describe_log_dirs.v1.request as describe_log_dirs_v1
import kio.schema.describe_log_dirs.v2.request as describe_log_dirs_v2
import kio.schema.describe_log_dirs.v3.request as describe_log_dirs_v3
import kio.schema.describe_log_dirs.v4.request as describe_log_dirs_v4
import kio.schema.describe_producers.v0.request as describe_producers_v0
import kio.schema.describe_share_group_offsets.v0.request as describe_share_group_offsets_v0
import kio.schema.describe_topic_partitions.v0.request as describe_topic_partitions_v0
import kio.schema.describe_transactions.v0.request as describe_transactions_v0
import kio.schema.describe_user_scram_credentials.v0.request as describe_user_scram_credentials_v0
import kio.schema.elect_leaders.v0.request as elect_leaders_v0
import kio.schema.elect_leaders.v1.request as elect_leaders_v1
import kio.schema.elect_leaders.v2.request as elect_leaders_v2
import kio.schema.end_txn.v0.request as end_txn_v0
import kio.schema.end_txn.v1.request as end_txn_v1
import kio.schema.end_txn.v2.request as end_txn_v2
import kio.schema.end_txn.v3.request as end_txn_v3
import kio.schema.end_txn.v4.request as end_txn_v4
import kio.schema.end_txn.v5.request as end_txn_v5
import kio.schema.fetch.v4.request as fetch_v4
import kio.schema.fetch.v5.request as fetch_v5
import kio.schema.fetch.v6.request as fetch_v6
import kio.schema.fetch.v7.request as fetch_v7
import kio.schema.fetch.v8.request as fetch_v8
import kio.schema.fetch.v9.request as fetch_v9
import kio.schema.fetch.v10.request as fetch_v10
import kio.schema.fetch.v11.request as fetch_v11
import kio.schema.fetch.v12.request as fetch_v12
import kio.schema.fetch.v13.request as fetch_v13
import kio.schema.fetch.v14.request as fetch_v14
import kio.schema.fetch.v15.request as fetch_v15
import kio.schema.fetch.v16.request as fetch_v16
import kio.schema.fetch.v17.request as fetch_v17
import kio.schema.find_coordinator.v0.request as find_coordinator_v0
import kio.schema.find_coordinator.v1.request as find_coordinator_v1
import kio.schema.find_coordinator.v2.request as find_coordinator_v2
import kio.schema.find_coordinator.v3.request as find_coordinator_v3
import kio.schema.find_coordinator.v4.request as find_coordinator_v4
import kio.schema.find_coordinator.v5.request as find_coordinator_v5
import kio.schema.find_coordinator.v6.request as find_coordinator_v6
import kio.schema.heartbeat.v0.request as heartbeat_v0
import kio.schema.heartbeat.v1.request as heartbeat_v1
import kio.schema.heartbeat.v2.request as heartbeat_v2
import kio.schema.heartbeat.v3.request as heartbeat_v3
import kio.schema.heartbeat.v4.request as heartbeat_v4
import kio.schema.incremental_alter_configs.v0.request as incremental_alter_configs_v0
import kio.schema.incremental_alter_configs.v1.request as incremental_alter_configs_v1
import kio.schema.init_producer_id.v0.request as init_producer_id_v0
import kio.schema.init_producer_id.v1.request as init_producer_id_v1
import kio.schema.init_producer_id.v2.request as init_producer_id_v2
import kio.schema.init_producer_id.v3.request as init_producer_id_v3
import kio.schema.init_producer_id.v4.request as init_producer_id_v4
import kio.schema.init_producer_id.v5.request as init_producer_id_v5
import kio.schema.initialize_share_group_state.v0.request as initialize_share_group_state_v0
import kio.schema.join_group.v0.request as join_group_v0
import kio.schema.join_group.v1.request as join_group_v1
import kio.schema.join_group.v2.request as join_group_v2
import kio.schema.join_group.v3.request as join_group_v3
import kio.schema.join_group.v4.request as join_group_v4
import kio.schema.join_group.v5.request as join_group_v5
import kio.schema.join_group.v6.request as join_group_v6
import kio.schema.join_group.v7.request as join_group_v7
import kio.schema.join_group.v8.request as join_group_v8
import kio.schema.join_group.v9.request as join_group_v9
import kio.schema.leave_group.v0.request as leave_group_v0
import kio.schema.leave_group.v1.request as leave_group_v1
import kio.schema.leave_group.v2.request as leave_group_v2
import kio.schema.leave_group.v3.request as leave_group_v3
import kio.schema.leave_group.v4.request as leave_group_v4
import kio.schema.leave_group.v5.request as leave_group_v5
import kio.schema.list_groups.v0.request as list_groups_v0
import kio.schema.list_groups.v1.request as list_groups_v1
import kio.schema.list_groups.v2.request as list_groups_v2
import kio.schema.list_groups.v3.request as list_groups_v3
import kio.schema.list_groups.v4.request as list_groups_v4
import kio.schema.list_groups.v5.request as list_groups_v5
import kio.schema.list_offsets.v1.request as list_offsets_v1
import kio.schema.list_offsets.v2.request as list_offsets_v2
import kio.schema.list_offsets.v3.request as list_offsets_v3
import kio.schema.list_offsets.v4.request as list_offsets_v4
import kio.schema.list_offsets.v5.request as list_offsets_v5
import kio.schema.list_offsets.v6.request as list_offsets_v6
import kio.schema.list_offsets.v7.request as list_offsets_v7
import kio.schema.list_offsets.v8.request as list_offsets_v8
import kio.schema.list_offsets.v9.request as list_offsets_v9
import kio.schema.list_offsets.v10.request as list_offsets_v10
import kio.schema.list_offsets.v11.request as list_offsets_v11
import kio.schema.list_partition_reassignments.v0.request as list_partition_reassignments_v0
import kio.schema.list_transactions.v0.request as list_transactions_v0
import kio.schema.list_transactions.v1.request as list_transactions_v1
import kio.schema.metadata.v0.request as metadata_v0
import kio.schema.metadata.v1.request as metadata_v1
import kio.schema.metadata.v2.request as metadata_v2
import kio.schema.metadata.v3.request as metadata_v3
import kio.schema.metadata.v4.request as metadata_v4
import kio.schema.metadata.v5.request as metadata_v5
import kio.schema.metadata.v6.request as metadata_v6
import kio.schema.metadata.v7.request as metadata_v7
import kio.schema.metadata.v8.request as metadata_v8
import kio.schema.metadata.v9.request as metadata_v9
import kio.schema.metadata.v10.request as metadata_v10
import kio.schema.metadata.v11.request as metadata_v11
import kio.schema.metadata.v12.request as metadata_v12
import kio.schema.metadata.v13.request as metadata_v13
import kio.schema.offset_commit.v2.request as offset_commit_v2
import kio.schema.offset_commit.v3.request as offset_commit_v3
import kio.schema.offset_commit.v4.request as offset_commit_v4
import kio.schema.offset_commit.v5.request as offset_commit_v5
import kio.schema.offset_commit.v6.request as offset_commit_v6
import kio.schema.offset_commit.v7.request as offset_commit_v7
import kio.schema.offset_commit.v8.request as offset_commit_v8
import kio.schema.offset_commit.v9.request as offset_commit_v9
import kio.schema.offset_commit.v10.request as offset_commit_v10
import kio.schema.offset_delete.v0.request as offset_delete_v0
import kio.schema.offset_fetch.v1.request as offset_fetch_v1
import kio.schema.offset_fetch.v2.request as offset_fetch_v2
import kio.schema.offset_fetch.v3.request as offset_fetch_v3
import kio.schema.offset_fetch.v4.request as offset_fetch_v4
import kio.schema.offset_fetch.v5.request as offset_fetch_v5
import kio.schema.offset_fetch.v6.request as offset_fetch_v6
import kio.schema.offset_fetch.v7.request as offset_fetch_v7
import kio.schema.offset_fetch.v8.request as offset_fetch_v8
import kio.schema.offset_fetch.v9.request as offset_fetch_v9
import kio.schema.offset_fetch.v10.request as offset_fetch_v10
import kio.schema.offset_for_leader_epoch.v2.request as offset_for_leader_epoch_v2
import kio.schema.offset_for_leader_epoch.v3.request as offset_for_leader_epoch_v3
import kio.schema.offset_for_leader_epoch.v4.request as offset_for_leader_epoch_v4
import kio.schema.produce.v3.request as produce_v3
import kio.schema.produce.v4.request as produce_v4
import kio.schema.produce.v5.request as produce_v5
import kio.schema.produce.v6.request as produce_v6
import kio.schema.produce.v7.request as produce_v7
import kio.schema.produce.v8.request as produce_v8
import kio.schema.produce.v9.request as produce_v9
import kio.schema.produce.v10.request as produce_v10
import kio.schema.produce.v11.request as produce_v11
import kio.schema.produce.v12.request as produce_v12
import kio.schema.produce.v13.request as produce_v13
import kio.schema.read_share_group_state.v0.request as read_share_group_state_v0
import kio.schema.read_share_group_state_summary.v0.request as read_share_group_state_summary_v0
import kio.schema.sasl_authenticate.v0.request as sasl_authenticate_v0
import kio.schema.sasl_authenticate.v1.request as sasl_authenticate_v1
import kio.schema.sasl_authenticate.v2.request as sasl_authenticate_v2
import kio.schema.sasl_handshake.v0.request as sasl_handshake_v0
import kio.schema.sasl_handshake.v1.request as sasl_handshake_v1
import kio.schema.share_acknowledge.v1.request as share_acknowledge_v1
import kio.schema.share_acknowledge.v2.request as share_acknowledge_v2
import kio.schema.share_fetch.v1.request as share_fetch_v1
import kio.schema.share_fetch.v2.request as share_fetch_v2
import kio.schema.share_group_describe.v1.request as share_group_describe_v1
import kio.schema.share_group_heartbeat.v1.request as share_group_heartbeat_v1
import kio.schema.sync_group.v0.request as sync_group_v0
import kio.schema.sync_group.v1.request as sync_group_v1
import kio.schema.sync_group.v2.request as sync_group_v2
import kio.schema.sync_group.v3.request as sync_group_v3
import kio.schema.sync_group.v4.request as sync_group_v4
import kio.schema.sync_group.v5.request as sync_group_v5
import kio.schema.txn_offset_commit.v0.request as txn_offset_commit_v0
import kio.schema.txn_offset_commit.v1.request as txn_offset_commit_v1
import kio.schema.txn_offset_commit.v2.request as txn_offset_commit_v2
import kio.schema.txn_offset_commit.v3.request as txn_offset_commit_v3
import kio.schema.txn_offset_commit.v4.request as txn_offset_commit_v4
import kio.schema.txn_offset_commit.v5.request as txn_offset_commit_v5
import kio.schema.update_features.v0.request as update_features_v0
import kio.schema.update_features.v1.request as update_features_v1
import kio.schema.update_features.v2.request as update_features_v2
import kio.schema.write_share_group_state.v0.request as write_share_group_state_v0
import kio.schema.write_txn_markers.v1.request as write_txn_markers_v1
import kio.schema.write_txn_markers.v2.request as write_txn_markers_v2

import samsa.protocol.controlled_shutdown as controlled_shutdown

AclCreation: TypeAlias = (
    create_acls_v1.AclCreation | create_acls_v2.AclCreation | create_acls_v3.AclCreation
)
AddOffsetsToTxnRequest: TypeAlias = (
    add_offsets_to_txn_v0.AddOffsetsToTxnRequest | add_offsets_to_txn_v1.AddOffsetsToTxnRequest
    | add_offsets_to_txn_v2.AddOffsetsToTxnRequest | add_offsets_to_txn_v3.AddOffsetsToTxnRequest
    | add_offsets_to_txn_v4.AddOffsetsToTxnRequest
)
AddPartitionsToTxnRequest: TypeAlias = (
    add_partitions_to_txn_v0.AddPartitionsToTxnRequest
    | add_partitions_to_txn_v1.AddPartitionsToTxnRequest
    | add_partitions_to_txn_v2.AddPartitionsToTxnRequest
    | add_partitions_to_txn_v3.AddPartitionsToTxnRequest
    | add_partitions_to_txn_v4.AddPartitionsToTxnRequest
    | add_partitions_to_txn_v5.AddPartitionsToTxnRequest
)
AddPartitionsToTxnRequestBatched: TypeAlias = (
    add_partitions_to_txn_v4.AddPartitionsToTxnRequest
    | add_partitions_to_txn_v5.AddPartitionsToTxnRequest
)
AddPartitionsToTxnRequestClient: TypeAlias = (
    add_partitions_to_txn_v0.AddPartitionsToTxnRequest
    | add_partitions_to_txn_v1.AddPartitionsToTxnRequest
    | add_partitions_to_txn_v2.AddPartitionsToTxnRequest
    | add_partitions_to_txn_v3.AddPartitionsToTxnRequest
)
AlterClientQuotasEntity: TypeAlias = (
    alter_client_quotas_v0.EntityData | alter_client_quotas_v1.EntityData
)
AlterClientQuotasOp: TypeAlias = alter_client_quotas_v0.OpData | alter_client_quotas_v1.OpData
AlterClientQuotasRequest: TypeAlias = (
    alter_client_quotas_v0.AlterClientQuotasRequest
    | alter_client_quotas_v1.AlterClientQuotasRequest
)
AlterConfigsRequest: TypeAlias = (
    alter_configs_v0.AlterConfigsRequest | alter_configs_v1.AlterConfigsRequest
    | alter_configs_v2.AlterConfigsRequest
)
AlterConfigsResource: TypeAlias = (
    alter_configs_v0.AlterConfigsResource | alter_configs_v1.AlterConfigsResource
    | alter_configs_v2.AlterConfigsResource
)
AlterPartitionReassignmentsRequest: TypeAlias = (
    alter_partition_reassignments_v0.AlterPartitionReassignmentsRequest
    | alter_partition_reassignments_v1.AlterPartitionReassignmentsRequest
)
AlterReplicaLogDirsRequest: TypeAlias = (
    alter_replica_log_dirs_v1.AlterReplicaLogDirsRequest
    | alter_replica_log_dirs_v2.AlterReplicaLogDirsRequest
)
AlterShareGroupOffsetsRequest: TypeAlias = (
    alter_share_group_offsets_v0.AlterShareGroupOffsetsRequest
)
AlterShareGroupOffsetsTopic: TypeAlias = (
    alter_share_group_offsets_v0.AlterShareGroupOffsetsRequestTopic
)
AlterUserScramCredentialsRequest: TypeAlias = (
    alter_user_scram_credentials_v0.AlterUserScramCredentialsRequest
)
ApiVersionsRequest: TypeAlias = (
    api_versions_v0.ApiVersionsRequest | api_versions_v1.ApiVersionsRequest
    | api_versions_v2.ApiVersionsRequest | api_versions_v3.ApiVersionsRequest
    | api_versions_v4.ApiVersionsRequest
)
ConsumerGroupDescribeRequest: TypeAlias = (
    consumer_group_describe_v0.ConsumerGroupDescribeRequest
    | consumer_group_describe_v1.ConsumerGroupDescribeRequest
)
ConsumerGroupHeartbeatRequest: TypeAlias = (
    consumer_group_heartbeat_v0.ConsumerGroupHeartbeatRequest
    | consumer_group_heartbeat_v1.ConsumerGroupHeartbeatRequest
)
ControlledShutdownRequest: TypeAlias = (
    controlled_shutdown.ControlledShutdownRequestV1
    | controlled_shutdown.ControlledShutdownRequestV2
    | controlled_shutdown.ControlledShutdownRequestV3
)
CreateAclsRequest: TypeAlias = (
    create_acls_v1.CreateAclsRequest | create_acls_v2.CreateAclsRequest
    | create_acls_v3.CreateAclsRequest
)
CreatePartitionsRequest: TypeAlias = (
    create_partitions_v0.CreatePartitionsRequest | create_partitions_v1.CreatePartitionsRequest
    | create_partitions_v2.CreatePartitionsRequest | create_partitions_v3.CreatePartitionsRequest
)
CreateTopicsRequest: TypeAlias = (
    create_topics_v2.CreateTopicsRequest | create_topics_v3.CreateTopicsRequest
    | create_topics_v4.CreateTopicsRequest | create_topics_v5.CreateTopicsRequest
    | create_topics_v6.CreateTopicsRequest | create_topics_v7.CreateTopicsRequest
)
DeleteAclsFilter: TypeAlias = (
    delete_acls_v1.DeleteAclsFilter | delete_acls_v2.DeleteAclsFilter
    | delete_acls_v3.DeleteAclsFilter
)
DeleteAclsRequest: TypeAlias = (
    delete_acls_v1.DeleteAclsRequest | delete_acls_v2.DeleteAclsRequest
    | delete_acls_v3.DeleteAclsRequest
)
DeleteGroupsRequest: TypeAlias = (
    delete_groups_v0.DeleteGroupsRequest | delete_groups_v1.DeleteGroupsRequest
    | delete_groups_v2.DeleteGroupsRequest
)
DeleteRecordsRequest: TypeAlias = (
    delete_records_v0.DeleteRecordsRequest | delete_records_v1.DeleteRecordsRequest
    | delete_records_v2.DeleteRecordsRequest
)
DeleteShareGroupOffsetsRequest: TypeAlias = (
    delete_share_group_offsets_v0.DeleteShareGroupOffsetsRequest
)
DeleteShareGroupOffsetsTopic: TypeAlias = (
    delete_share_group_offsets_v0.DeleteShareGroupOffsetsRequestTopic
)
DeleteShareGroupStatePartition: TypeAlias = delete_share_group_state_v0.PartitionData
DeleteShareGroupStateRequest: TypeAlias = delete_share_group_state_v0.DeleteShareGroupStateRequest
DeleteTopicsRequest: TypeAlias = (
    delete_topics_v1.DeleteTopicsRequest | delete_topics_v2.DeleteTopicsRequest
    | delete_topics_v3.DeleteTopicsRequest | delete_topics_v4.DeleteTopicsRequest
    | delete_topics_v5.DeleteTopicsRequest | delete_topics_v6.DeleteTopicsRequest
)
DeleteTopicsRequestByName: TypeAlias = (
    delete_topics_v1.DeleteTopicsRequest | delete_topics_v2.DeleteTopicsRequest
    | delete_topics_v3.DeleteTopicsRequest | delete_topics_v4.DeleteTopicsRequest
    | delete_topics_v5.DeleteTopicsRequest
)
DescribeAclsRequest: TypeAlias = (
    describe_acls_v1.DescribeAclsRequest | describe_acls_v2.DescribeAclsRequest
    | describe_acls_v3.DescribeAclsRequest
)
DescribeClientQuotasRequest: TypeAlias = (
    describe_client_quotas_v0.DescribeClientQuotasRequest
    | describe_client_quotas_v1.DescribeClientQuotasRequest
)
DescribeClusterRequest: TypeAlias = (
    describe_cluster_v0.DescribeClusterRequest | describe_cluster_v1.DescribeClusterRequest
)
DescribeConfigsRequest: TypeAlias = (
    describe_configs_v1.DescribeConfigsRequest | describe_configs_v2.DescribeConfigsRequest
    | describe_configs_v3.DescribeConfigsRequest | describe_configs_v4.DescribeConfigsRequest
)
DescribeGroupsRequest: TypeAlias = (
    describe_groups_v0.DescribeGroupsRequest | describe_groups_v1.DescribeGroupsRequest
    | describe_groups_v2.DescribeGroupsRequest | describe_groups_v3.DescribeGroupsRequest
    | describe_groups_v4.DescribeGroupsRequest | describe_groups_v5.DescribeGroupsRequest
)
DescribeLogDirsRequest: TypeAlias = (
    describe_log_dirs_v1.DescribeLogDirsRequest | describe_log_dirs_v2.DescribeLogDirsRequest
    | describe_log_dirs_v3.DescribeLogDirsRequest | describe_log_dirs_v4.DescribeLogDirsRequest
)
DescribeProducersRequest: TypeAlias = describe_producers_v0.DescribeProducersRequest
DescribeShareGroupOffsetsRequest: TypeAlias = (
    describe_share_group_offsets_v0.DescribeShareGroupOffsetsRequest
)
DescribeTopicPartitionsRequest: TypeAlias = (
    describe_topic_partitions_v0.DescribeTopicPartitionsRequest
)
DescribeTransactionsRequest: TypeAlias = describe_transactions_v0.DescribeTransactionsRequest
DescribeUserScramCredentialsRequest: TypeAlias = (
    describe_user_scram_credentials_v0.DescribeUserScramCredentialsRequest
)
ElectLeadersRequest: TypeAlias = (
    elect_leaders_v0.ElectLeadersRequest | elect_leaders_v1.ElectLeadersRequest
    | elect_leaders_v2.ElectLeadersRequest
)
EndTxnRequest: TypeAlias = (
    end_txn_v0.EndTxnRequest | end_txn_v1.EndTxnRequest | end_txn_v2.EndTxnRequest
    | end_txn_v3.EndTxnRequest | end_txn_v4.EndTxnRequest | end_txn_v5.EndTxnRequest
)
FetchRequest: TypeAlias = (
    fetch_v4.FetchRequest | fetch_v5.FetchRequest | fetch_v6.FetchRequest | fetch_v7.FetchRequest
    | fetch_v8.FetchRequest | fetch_v9.FetchRequest | fetch_v10.FetchRequest
    | fetch_v11.FetchRequest | fetch_v12.FetchRequest | fetch_v13.FetchRequest
    | fetch_v14.FetchRequest | fetch_v15.FetchRequest | fetch_v16.FetchRequest
    | fetch_v17.FetchRequest
)
FetchRequestWithReplicaState: TypeAlias = (
    fetch_v15.FetchRequest | fetch_v16.FetchRequest | fetch_v17.FetchRequest
)
FindCoordinatorRequest: TypeAlias = (
    find_coordinator_v0.FindCoordinatorRequest | find_coordinator_v1.FindCoordinatorRequest
    | find_coordinator_v2.FindCoordinatorRequest | find_coordinator_v3.FindCoordinatorRequest
    | find_coordinator_v4.FindCoordinatorRequest | find_coordinator_v5.FindCoordinatorRequest
    | find_coordinator_v6.FindCoordinatorRequest
)
FindCoordinatorRequestBatched: TypeAlias = (
    find_coordinator_v4.FindCoordinatorRequest | find_coordinator_v5.FindCoordinatorRequest
    | find_coordinator_v6.FindCoordinatorRequest
)
HeartbeatRequest: TypeAlias = (
    heartbeat_v0.HeartbeatRequest | heartbeat_v1.HeartbeatRequest | heartbeat_v2.HeartbeatRequest
    | heartbeat_v3.HeartbeatRequest | heartbeat_v4.HeartbeatRequest
)
IncrementalAlterConfigsRequest: TypeAlias = (
    incremental_alter_configs_v0.IncrementalAlterConfigsRequest
    | incremental_alter_configs_v1.IncrementalAlterConfigsRequest
)
IncrementalAlterConfigsResource: TypeAlias = (
    incremental_alter_configs_v0.AlterConfigsResource
    | incremental_alter_configs_v1.AlterConfigsResource
)
InitProducerIdRequest: TypeAlias = (
    init_producer_id_v0.InitProducerIdRequest | init_producer_id_v1.InitProducerIdRequest
    | init_producer_id_v2.InitProducerIdRequest | init_producer_id_v3.InitProducerIdRequest
    | init_producer_id_v4.InitProducerIdRequest | init_producer_id_v5.InitProducerIdRequest
)
InitializeShareGroupStatePartition: TypeAlias = initialize_share_group_state_v0.PartitionData
InitializeShareGroupStateRequest: TypeAlias = (
    initialize_share_group_state_v0.InitializeShareGroupStateRequest
)
JoinGroupRequest: TypeAlias = (
    join_group_v0.JoinGroupRequest | join_group_v1.JoinGroupRequest | join_group_v2.JoinGroupRequest
    | join_group_v3.JoinGroupRequest | join_group_v4.JoinGroupRequest
    | join_group_v5.JoinGroupRequest | join_group_v6.JoinGroupRequest
    | join_group_v7.JoinGroupRequest | join_group_v8.JoinGroupRequest
    | join_group_v9.JoinGroupRequest
)
LeaveGroupRequest: TypeAlias = (
    leave_group_v0.LeaveGroupRequest | leave_group_v1.LeaveGroupRequest
    | leave_group_v2.LeaveGroupRequest | leave_group_v3.LeaveGroupRequest
    | leave_group_v4.LeaveGroupRequest | leave_group_v5.LeaveGroupRequest
)
LeaveGroupRequestBatched: TypeAlias = (
    leave_group_v3.LeaveGroupRequest | leave_group_v4.LeaveGroupRequest
    | leave_group_v5.LeaveGroupRequest
)
ListGroupsRequest: TypeAlias = (
    list_groups_v0.ListGroupsRequest | list_groups_v1.ListGroupsRequest
    | list_groups_v2.ListGroupsRequest | list_groups_v3.ListGroupsRequest
    | list_groups_v4.ListGroupsRequest | list_groups_v5.ListGroupsRequest
)
ListOffsetsRequest: TypeAlias = (
    list_offsets_v1.ListOffsetsRequest | list_offsets_v2.ListOffsetsRequest
    | list_offsets_v3.ListOffsetsRequest | list_offsets_v4.ListOffsetsRequest
    | list_offsets_v5.ListOffsetsRequest | list_offsets_v6.ListOffsetsRequest
    | list_offsets_v7.ListOffsetsRequest | list_offsets_v8.ListOffsetsRequest
    | list_offsets_v9.ListOffsetsRequest | list_offsets_v10.ListOffsetsRequest
    | list_offsets_v11.ListOffsetsRequest
)
ListPartitionReassignmentsRequest: TypeAlias = (
    list_partition_reassignments_v0.ListPartitionReassignmentsRequest
)
ListTransactionsRequest: TypeAlias = (
    list_transactions_v0.ListTransactionsRequest | list_transactions_v1.ListTransactionsRequest
)
MetadataRequest: TypeAlias = (
    metadata_v0.MetadataRequest | metadata_v1.MetadataRequest | metadata_v2.MetadataRequest
    | metadata_v3.MetadataRequest | metadata_v4.MetadataRequest | metadata_v5.MetadataRequest
    | metadata_v6.MetadataRequest | metadata_v7.MetadataRequest | metadata_v8.MetadataRequest
    | metadata_v9.MetadataRequest | metadata_v10.MetadataRequest | metadata_v11.MetadataRequest
    | metadata_v12.MetadataRequest | metadata_v13.MetadataRequest
)
OffsetCommitRequest: TypeAlias = (
    offset_commit_v2.OffsetCommitRequest | offset_commit_v3.OffsetCommitRequest
    | offset_commit_v4.OffsetCommitRequest | offset_commit_v5.OffsetCommitRequest
    | offset_commit_v6.OffsetCommitRequest | offset_commit_v7.OffsetCommitRequest
    | offset_commit_v8.OffsetCommitRequest | offset_commit_v9.OffsetCommitRequest
    | offset_commit_v10.OffsetCommitRequest
)
OffsetDeleteRequest: TypeAlias = offset_delete_v0.OffsetDeleteRequest
OffsetFetchRequest: TypeAlias = (
    offset_fetch_v1.OffsetFetchRequest | offset_fetch_v2.OffsetFetchRequest
    | offset_fetch_v3.OffsetFetchRequest | offset_fetch_v4.OffsetFetchRequest
    | offset_fetch_v5.OffsetFetchRequest | offset_fetch_v6.OffsetFetchRequest
    | offset_fetch_v7.OffsetFetchRequest | offset_fetch_v8.OffsetFetchRequest
    | offset_fetch_v9.OffsetFetchRequest | offset_fetch_v10.OffsetFetchRequest
)
OffsetFetchRequestBatched: TypeAlias = (
    offset_fetch_v8.OffsetFetchRequest | offset_fetch_v9.OffsetFetchRequest
    | offset_fetch_v10.OffsetFetchRequest
)
OffsetForLeaderEpochRequest: TypeAlias = (
    offset_for_leader_epoch_v2.OffsetForLeaderEpochRequest
    | offset_for_leader_epoch_v3.OffsetForLeaderEpochRequest
    | offset_for_leader_epoch_v4.OffsetForLeaderEpochRequest
)
ProduceRequest: TypeAlias = (
    produce_v3.ProduceRequest | produce_v4.ProduceRequest | produce_v5.ProduceRequest
    | produce_v6.ProduceRequest | produce_v7.ProduceRequest | produce_v8.ProduceRequest
    | produce_v9.ProduceRequest | produce_v10.ProduceRequest | produce_v11.ProduceRequest
    | produce_v12.ProduceRequest | produce_v13.ProduceRequest
)
ReadShareGroupStatePartition: TypeAlias = read_share_group_state_v0.PartitionData
ReadShareGroupStateRequest: TypeAlias = read_share_group_state_v0.ReadShareGroupStateRequest
ReadShareGroupStateSummaryPartition: TypeAlias = read_share_group_state_summary_v0.PartitionData
ReadShareGroupStateSummaryRequest: TypeAlias = (
    read_share_group_state_summary_v0.ReadShareGroupStateSummaryRequest
)
SaslAuthenticateRequest: TypeAlias = (
    sasl_authenticate_v0.SaslAuthenticateRequest | sasl_authenticate_v1.SaslAuthenticateRequest
    | sasl_authenticate_v2.SaslAuthenticateRequest
)
SaslHandshakeRequest: TypeAlias = (
    sasl_handshake_v0.SaslHandshakeRequest | sasl_handshake_v1.SaslHandshakeRequest
)
ShareAcknowledgeRequest: TypeAlias = (
    share_acknowledge_v1.ShareAcknowledgeRequest | share_acknowledge_v2.ShareAcknowledgeRequest
)
ShareFetchRequest: TypeAlias = share_fetch_v1.ShareFetchRequest | share_fetch_v2.ShareFetchRequest
ShareGroupDescribeRequest: TypeAlias = share_group_describe_v1.ShareGroupDescribeRequest
ShareGroupHeartbeatRequest: TypeAlias = share_group_heartbeat_v1.ShareGroupHeartbeatRequest
SyncGroupRequest: TypeAlias = (
    sync_group_v0.SyncGroupRequest | sync_group_v1.SyncGroupRequest | sync_group_v2.SyncGroupRequest
    | sync_group_v3.SyncGroupRequest | sync_group_v4.SyncGroupRequest
    | sync_group_v5.SyncGroupRequest
)
TxnOffsetCommitRequest: TypeAlias = (
    txn_offset_commit_v0.TxnOffsetCommitRequest | txn_offset_commit_v1.TxnOffsetCommitRequest
    | txn_offset_commit_v2.TxnOffsetCommitRequest | txn_offset_commit_v3.TxnOffsetCommitRequest
    | txn_offset_commit_v4.TxnOffsetCommitRequest | txn_offset_commit_v5.TxnOffsetCommitRequest
)
UpdateFeaturesRequest: TypeAlias = (
    update_features_v0.UpdateFeaturesRequest | update_features_v1.UpdateFeaturesRequest
    | update_features_v2.UpdateFeaturesRequest
)
WriteShareGroupStatePartition: TypeAlias = write_share_group_state_v0.PartitionData
WriteShareGroupStateRequest: TypeAlias = write_share_group_state_v0.WriteShareGroupStateRequest
WriteTxnMarkersRequest: TypeAlias = (
    write_txn_markers_v1.WriteTxnMarkersRequest | write_txn_markers_v2.WriteTxnMarkersRequest
)
