"""AlterReplicaLogDirs (34): move replicas to other log directories of this broker
(broker/replication/log_dir_mover.py). DescribeLogDirs (35): each log directory, its partitions'
sizes (a replica being moved there: its future log, `is_future_key`, with its lag) and the disk's
capacity, and (v5, KIP-1066) whether it is cordoned (cordoned.log.dirs: it takes no new
partitions); an offline directory (failed I/O) answers KAFKA_STORAGE_ERROR, as in Kafka."""

from __future__ import annotations

import os
from collections import defaultdict
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from samsa.protocol.errors import ErrorCode

from ..context import RequestContext
from ..security.authorizer import AclOperation, ResourceType
from .common import refused_on_cluster
from .declare import api

if TYPE_CHECKING:
    from .requests import AlterReplicaLogDirsRequest, DescribeLogDirsRequest


@api(34, "AlterReplicaLogDirs", (1, 2))
async def handle_alter_replica_log_dirs(
    ctx: RequestContext, request: AlterReplicaLogDirsRequest
) -> dict[str, Any]:
    allowed = ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER)
    mover = ctx.replicas.log_dir_mover
    results: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for d in request.dirs:
        for t in d.topics:
            for index in t.partitions:
                if not allowed:
                    code = ErrorCode.cluster_authorization_failed
                elif mover is None:
                    code = ErrorCode.kafka_storage_error
                else:
                    code = mover.alter(t.name, index, d.path)
                results[t.name].append({"partition_index": index, "error_code": code})
    return {
        "throttle_time": 0,
        "results": [{"topic_name": name, "partitions": parts}
                    for name, parts in results.items()],
    }


@api(35, "DescribeLogDirs", (1, 5))
async def handle_describe_log_dirs(
    ctx: RequestContext, request: DescribeLogDirsRequest
) -> dict[str, Any]:
    if refused := refused_on_cluster(ctx, AclOperation.DESCRIBE, results=[]):
        return refused
    dirs = ctx.log_dirs
    wanted: dict[str, set[int]] | None = None
    if request.topics is not None:
        wanted = {t.topic: set(t.partitions) for t in request.topics}
    by_dir: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for p in ctx.replicas.partitions():
        if wanted is not None and p.index not in wanted.get(p.topic, ()):
            continue
        by_dir[p.log_dir][p.topic].append(
            {
                "partition_index": p.index,
                "partition_size": p.size_in_bytes,
                "offset_lag": 0,
                "is_future_key": False,
            }
        )
    for (topic, index), fut in dirs.future_logs().items():
        if wanted is not None and index not in wanted.get(topic, ()):
            continue
        # Kafka's getLogEndOffsetLag: the current replica's end minus the future's, -1 when
        # this broker hosts no such replica (not created, or its dir offline)
        current = ctx.replicas.get(topic, index)
        by_dir[fut.parent_dir][topic].append(
            {
                "partition_index": index,
                "partition_size": fut.size_in_bytes,
                "offset_lag": (-1 if current is None
                               else current.log_end_offset - fut.log_end_offset),
                "is_future_key": True,
            }
        )
    offline = set(dirs.offline_dirs)
    results = []
    for d in dirs.dirs:
        try:
            disk = None if d in offline else os.statvfs(d)
        except OSError:
            disk = None
        topics = by_dir.get(d, {})
        entries: list[dict[str, Any]] = [
            {"name": name, "partitions": sorted(parts, key=itemgetter("partition_index"))}
            for name, parts in sorted(topics.items())
        ]
        results.append(
            {
                "error_code": ErrorCode.kafka_storage_error if d in offline else ErrorCode.none,
                "log_dir": d,
                "topics": entries,
                "total_bytes": -1 if disk is None else disk.f_blocks * disk.f_frsize,
                "usable_bytes": -1 if disk is None else disk.f_bavail * disk.f_frsize,
                "is_cordoned": d in dirs.cordoned,  # v5 (KIP-1066)
            }
        )
    return {"throttle_time": 0, "error_code": ErrorCode.none, "results": results}
