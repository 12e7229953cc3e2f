"""The one way a transaction marker (COMMIT/ABORT control batch) reaches a partition.

`write_txn_markers` is what the transaction coordinator calls; today every partition is local
(single broker) so it appends directly. In a cluster it sends WriteTxnMarkers to each leader
and returns the same per-partition error codes. `append_marker` is the leader side, shared
with the WriteTxnMarkers handler.

A marker written to a `__consumer_offsets` partition also settles the pending transactional
offsets of the producer in the group coordinator (`broker.groups.complete_transaction`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Any

from protocol.records import build_control_batch
from storage.errors import StorageError

from .replica_manager import PartitionError

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
NONE = 0
UNKNOWN_SERVER_ERROR = -1


def append_marker(
    broker: Any,
    topic: str,
    partition: int,
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    coordinator_epoch: int,
) -> int:
    """Append one marker as this partition's leader; returns a Kafka error code."""
    try:
        leader = broker.replicas.leader_partition(topic, partition)
        batch = build_control_batch(
            producer_id, producer_epoch, commit, coordinator_epoch, int(time.time() * 1000)
        )
        leader.append_as_leader(batch, origin="coordinator")
    except PartitionError as exc:
        return exc.error_code
    except StorageError as exc:
        log.warning(
            "marker (pid %d epoch %d %s) to %s-%d rejected: %s",
            producer_id,
            producer_epoch,
            "commit" if commit else "abort",
            topic,
            partition,
            exc,
        )
        return int(exc.error_code)
    if topic == OFFSETS_TOPIC:
        groups = getattr(broker, "groups", None)
        if groups is not None and hasattr(groups, "complete_transaction"):
            try:
                groups.complete_transaction(partition, producer_id, commit)
            except Exception:  # the marker is written; the group side must not undo that
                log.exception(
                    "group coordinator failed to complete txn of pid %d on %s-%d",
                    producer_id,
                    topic,
                    partition,
                )
    return NONE


async def write_txn_markers(
    broker: Any,
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    coordinator_epoch: int,
    partitions: Iterable[tuple[str, int]],
) -> dict[tuple[str, int], int]:
    """Write the marker to every partition; per-partition error codes (0 = written)."""
    return {
        (topic, p): append_marker(
            broker, topic, p, producer_id, producer_epoch, commit, coordinator_epoch
        )
        for topic, p in partitions
    }
