"""DescribeLogDirs (35): each log directory, its partitions' sizes and the disk's capacity;
an offline directory (failed I/O) answers KAFKA_STORAGE_ERROR, as in Kafka."""

from __future__ import annotations

import os
from collections import defaultdict
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from samsa.protocol.errors import ErrorCode

from ..context import RequestContext
from ..security.authorizer import AclOperation, ResourceType

if TYPE_CHECKING:
    from .requests import DescribeLogDirsRequest


async def handle_describe_log_dirs(
    ctx: RequestContext, request: DescribeLogDirsRequest
) -> dict[str, Any]:
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.CLUSTER):
        return {"throttle_time": 0, "error_code": ErrorCode.cluster_authorization_failed,
                "results": []}
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
            }
        )
    return {"throttle_time": 0, "error_code": ErrorCode.none, "results": results}
