"""DescribeLogDirs (35): each log directory, its partitions' sizes and the disk's capacity;
an offline directory (failed I/O) answers KAFKA_STORAGE_ERROR, as in Kafka."""

from __future__ import annotations

import os
from collections import defaultdict
from typing import Any

KAFKA_STORAGE_ERROR = 56


async def handle_describe_log_dirs(ctx: Any, request: Any) -> dict[str, Any]:
    broker = ctx.broker
    dirs = broker.log_manager
    wanted: dict[str, set[int]] | None = None
    if request.topics is not None:
        wanted = {t.topic: set(t.partitions) for t in request.topics}
    by_dir: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for p in broker.replicas.partitions():
        if wanted is not None and p.index not in wanted.get(p.topic, ()):
            continue
        by_dir[p.log.parent_dir][p.topic].append(
            {
                "partition_index": p.index,
                "partition_size": p.log.size_in_bytes,
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
        results.append(
            {
                "error_code": KAFKA_STORAGE_ERROR if d in offline else 0,
                "log_dir": d,
                "topics": [
                    {"name": name, "partitions": sorted(parts, key=lambda x: x["partition_index"])}
                    for name, parts in sorted(topics.items())
                ],
                "total_bytes": -1 if disk is None else disk.f_blocks * disk.f_frsize,
                "usable_bytes": -1 if disk is None else disk.f_bavail * disk.f_frsize,
            }
        )
    return {"throttle_time": 0, "error_code": 0, "results": results}
