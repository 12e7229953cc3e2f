"""DescribeLogDirs (35): the log directory, its partitions' sizes and the disk's capacity."""

from __future__ import annotations

import os
from collections import defaultdict
from typing import Any


async def handle_describe_log_dirs(ctx: Any, request: Any) -> dict[str, Any]:
    broker = ctx.broker
    wanted: dict[str, set[int]] | None = None
    if request.topics is not None:
        wanted = {t.topic: set(t.partitions) for t in request.topics}
    by_topic: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for p in broker.replicas.partitions():
        if wanted is not None and p.index not in wanted.get(p.topic, ()):
            continue
        by_topic[p.topic].append(
            {
                "partition_index": p.index,
                "partition_size": p.log.size_in_bytes,
                "offset_lag": 0,
                "is_future_key": False,
            }
        )
    disk = os.statvfs(broker.data_dir)
    return {
        "throttle_time": 0,
        "error_code": 0,
        "results": [
            {
                "error_code": 0,
                "log_dir": str(broker.data_dir.resolve()),
                "topics": [
                    {"name": name, "partitions": sorted(parts, key=lambda x: x["partition_index"])}
                    for name, parts in sorted(by_topic.items())
                ],
                "total_bytes": disk.f_blocks * disk.f_frsize,
                "usable_bytes": disk.f_bavail * disk.f_frsize,
            }
        ],
    }
