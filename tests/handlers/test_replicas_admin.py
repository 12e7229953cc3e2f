"""The replicas' administration: ElectLeaders (43), AlterPartitionReassignments (45),
ListPartitionReassignments (46), DescribeLogDirs (35), AlterReplicaLogDirs (34),
ControlledShutdown (7). Without ZooKeeper the broker is its own cluster: elections and
reassignments are answered from its one replica, ControlledShutdown is NOT_CONTROLLER."""

from __future__ import annotations

from samsa.protocol.errors import ErrorCode

from .harness import ALICE

PREFERRED = 0


async def test_elect_leaders_is_not_needed_for_the_one_replica(handlers):
    await handlers.create_topic("t")
    r = await handlers.call("ElectLeaders", 2, {"election_type": PREFERRED, "topic_partitions": [
        {"topic": "t", "partitions": [0, 4]}], "timeout": 5000})
    results = {p.partition_id: p.error_code for p in r.replica_election_results[0]
               .partition_result}
    assert r.error_code == ErrorCode.none
    assert results == {0: ErrorCode.election_not_needed,
                       4: ErrorCode.unknown_topic_or_partition}


async def test_reassignments(handlers):
    await handlers.create_topic("t")
    same = await handlers.call("AlterPartitionReassignments", 0, {"timeout": 5000, "topics": [
        {"name": "t", "partitions": [{"partition_index": 0, "replicas": [0]}]}]})
    elsewhere = await handlers.call("AlterPartitionReassignments", 0, {
        "timeout": 5000, "topics": [{"name": "t", "partitions": [
            {"partition_index": 0, "replicas": [5]}]}]})
    cancel = await handlers.call("AlterPartitionReassignments", 0, {
        "timeout": 5000, "topics": [{"name": "t", "partitions": [
            {"partition_index": 0, "replicas": None}]}]})
    listed = await handlers.call("ListPartitionReassignments", 0, {"timeout": 5000,
                                                                   "topics": None})
    assert same.responses[0].partitions[0].error_code == ErrorCode.none
    assert elsewhere.responses[0].partitions[0].error_code == (
        ErrorCode.invalid_replica_assignment)
    assert cancel.responses[0].partitions[0].error_code == ErrorCode.no_reassignment_in_progress
    assert (listed.error_code, listed.topics) == (ErrorCode.none, ())


async def test_describe_log_dirs(handlers, tmp_path):
    await handlers.create_topic("t", 2)
    await handlers.produce("t", 1, [b"x" * 100])
    r = await handlers.call("DescribeLogDirs", 4, {"topics": [{"topic": "t",
                                                               "partitions": [1]}]})
    (d,) = r.results
    assert (r.error_code, d.error_code, d.log_dir) == (
        ErrorCode.none, ErrorCode.none, str(tmp_path / "data"))
    assert [(t.name, [(p.partition_index, p.partition_size > 100) for p in t.partitions])
            for t in d.topics] == [("t", [(1, True)])]
    assert d.total_bytes > 0


async def test_alter_replica_log_dirs_to_an_unknown_dir(handlers, tmp_path):
    await handlers.create_topic("t")
    r = await handlers.call("AlterReplicaLogDirs", 2, {"dirs": [{
        "path": str(tmp_path / "elsewhere"), "topics": [{"name": "t", "partitions": [0]}]}]})
    assert r.results[0].partitions[0].error_code == ErrorCode.log_dir_not_found


async def test_controlled_shutdown_without_a_controller(handlers):
    r = await handlers.call("ControlledShutdown", 3, {"broker_id": 0, "broker_epoch": 1})
    assert (r.error_code, r.remaining_partitions) == (ErrorCode.not_controller, ())


async def test_cluster_authorization_failed(secured):
    await secured.create_topic("t")
    elect = await secured.call("ElectLeaders", 2, {"election_type": PREFERRED,
                                                   "topic_partitions": None, "timeout": 5000},
                               principal=ALICE)
    logs = await secured.call("DescribeLogDirs", 4, {"topics": None}, principal=ALICE)
    listed = await secured.call("ListPartitionReassignments", 0, {"timeout": 5000,
                                                                  "topics": None},
                                principal=ALICE)
    shutdown = await secured.call("ControlledShutdown", 3, {"broker_id": 0, "broker_epoch": 1},
                                  principal=ALICE)
    assert elect.error_code == ErrorCode.cluster_authorization_failed
    assert logs.error_code == ErrorCode.cluster_authorization_failed
    assert listed.error_code == ErrorCode.cluster_authorization_failed
    assert shutdown.error_code == ErrorCode.cluster_authorization_failed
