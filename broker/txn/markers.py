"""The one way a transaction marker (COMMIT/ABORT control batch) reaches a partition.

`TxnMarkerChannel` is the transaction coordinator's `samsa.coordinator.ports.TxnMarkerSender`
(Kafka's TransactionMarkerChannelManager): partitions led here are appended directly, the
others get one WriteTxnMarkers request per leader broker, with the same per-partition error
codes. `append_markers_replicated` is the leader side, shared with the
WriteTxnMarkers handler. Markers are written with acks=all: a marker counts as written once
the partition's ISR has it.

A marker written to a `__consumer_offsets` partition also settles the pending transactional
offsets of the producer in the group coordinator (`coordinator.ports.TransactionalOffsets`),
once the marker is replicated: offsets made visible there must survive a leader change.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

from samsa.coordinator.ports import TransactionalOffsets, TxnMarker
from samsa.protocol.errors import ErrorCode, KafkaError
from samsa.protocol.records import build_control_batch

from ..network.interbroker import BrokerConnection, BrokerUnavailable
from ..replication.replica_manager import PartitionError, ReplicaManager

if TYPE_CHECKING:
    from ..cluster.metadata_store import MetadataStore, TopicState
    from ..replication.partition import Partition

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
WRITE_TXN_MARKERS = 27  # the API key
MARKER_REPLICATION_S = 10.0
UNAVAILABLE_LOG_INTERVAL_S = 10.0  # the coordinator retries every 100 ms: INFO this often
_unavailable_logged: dict[int, float] = {}


class MarkerHost(Protocol):
    """What writing markers uses of the broker: the handlers' `BrokerServices`
    (WriteTxnMarkers) or the broker itself (the transaction coordinator's channel)."""

    @property
    def broker_id(self) -> int: ...

    @property
    def store(self) -> MetadataStore: ...

    @property
    def replicas(self) -> ReplicaManager: ...

    @property
    def groups(self) -> TransactionalOffsets: ...


def marker_batch(marker: TxnMarker) -> bytes:
    """The marker's control batch, stamped now: one for all the partitions a marker goes to
    (each append stamps its partition's offset and leader epoch around it)."""
    return build_control_batch(marker.producer_id, marker.producer_epoch, marker.commit,
                               marker.coordinator_epoch, int(time.time() * 1000))


def append_markers(broker: MarkerHost, marker: TxnMarker,
                   partitions: Iterable[tuple[str, int]], batch: bytes | None = None,
                   ) -> tuple[dict[tuple[str, int], int], list[tuple[str, int]]]:
    """Append the marker to each partition as its leader here (acks=all rules: the ISR must
    have min.insync.replicas members), all in this step: a Kafka error code per partition,
    and the partitions appended whose ISR does not have the marker yet (`await_markers`). One
    already replicated (no other ISR member) has its group offsets settled here, so a single
    broker finishes the markers before anything else runs. `batch`: `marker_batch(marker)`."""
    batch = marker_batch(marker) if batch is None else batch
    replicas = broker.replicas
    results: dict[tuple[str, int], int] = {}
    unreplicated: list[tuple[str, int]] = []
    for topic, p in partitions:
        leader = replicas.get(topic, p)
        if leader is None or not leader.is_leader:
            try:
                leader = replicas.leader_partition(topic, p)
            except PartitionError as exc:
                results[(topic, p)] = exc.error_code
                continue
        code = results[(topic, p)] = _append_to(leader, marker, batch)
        if code != ErrorCode.none:
            continue
        if leader.high_watermark >= leader.log_end_offset:
            settle_group_offsets(broker, topic, p, marker.producer_id, marker.commit)
        else:
            unreplicated.append((topic, p))
    return results, unreplicated


def _append_to(leader: Partition, marker: TxnMarker, batch: bytes) -> int:
    """One marker appended to a partition led here; a Kafka error code."""
    try:
        if len(leader.isr) < leader.min_insync_replicas:
            return ErrorCode.not_enough_replicas
        leader.append_as_leader(batch, origin="coordinator",
                                transaction_version=marker.transaction_version)
    except PartitionError as exc:
        return exc.error_code
    except KafkaError as exc:  # a StorageError or a record-format error
        log.warning(
            "marker (pid %d epoch %d %s) to %s-%d rejected: %s",
            marker.producer_id,
            marker.producer_epoch,
            "commit" if marker.commit else "abort",
            leader.topic,
            leader.index,
            exc,
        )
        return int(exc.error_code)
    return ErrorCode.none


def settle_group_offsets(
    broker: MarkerHost, topic: str, partition: int, producer_id: int, commit: bool
) -> None:
    """A replicated marker on `__consumer_offsets` makes the producer's pending transactional
    offsets committed (or drops them)."""
    if topic != OFFSETS_TOPIC:
        return
    try:
        broker.groups.complete_transaction(partition, producer_id, commit)
    except Exception:  # the marker is written; the group side must not undo that
        log.exception(
            "group coordinator failed to complete txn of pid %d on %s-%d",
            producer_id,
            topic,
            partition,
        )


async def _await_marker(
    broker: MarkerHost, topic: str, partition: int, producer_id: int, commit: bool
) -> int:
    """Wait until the ISR has what the leader appended (the marker just written)."""
    leader = broker.replicas.get(topic, partition)
    if leader is None:
        return ErrorCode.not_leader_or_follower
    epoch = leader.leader_epoch
    replicated = await leader.wait_for_high_watermark(
        leader.log_end_offset, MARKER_REPLICATION_S
    )
    if not leader.is_leader or leader.leader_epoch != epoch:
        return ErrorCode.not_leader_or_follower
    if not replicated:
        return ErrorCode.request_timed_out
    settle_group_offsets(broker, topic, partition, producer_id, commit)
    return ErrorCode.none


async def await_markers(broker: MarkerHost, marker: TxnMarker,
                        partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """`append_markers`' unreplicated partitions answered once their ISR has the marker,
    all waited for together (Kafka's delayed produce of the markers' append)."""
    codes = await asyncio.gather(*(
        _await_marker(broker, t, p, marker.producer_id, marker.commit) for t, p in partitions))
    return dict(zip(partitions, codes, strict=True))


async def append_markers_replicated(broker: MarkerHost, marker: TxnMarker,
                                    partitions: Iterable[tuple[str, int]]
                                    ) -> dict[tuple[str, int], int]:
    """`append_markers`, answered once the ISR has each marker (Kafka appends markers with
    acks=all), so a leader change cannot lose a marker the coordinator counted as written."""
    results, unreplicated = append_markers(broker, marker, partitions)
    if unreplicated:
        results.update(await await_markers(broker, marker, unreplicated))
    return results


class TxnMarkerChannel:
    """The transaction coordinator's marker sender (`samsa.coordinator.ports.TxnMarkerSender`):
    partitions led here are appended locally, the others get one WriteTxnMarkers request per
    leader broker, over a connection kept per leader."""

    def __init__(self, broker: MarkerHost) -> None:
        self.broker = broker
        self._connections: dict[int, BrokerConnection] = {}

    async def write_markers(self, marker: TxnMarker,
                            partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """Write the marker to every partition; per-partition error codes (NONE = written and
        replicated). Unknown leaders and unreachable brokers answer retriable codes. A
        transactions v2 marker goes as WriteTxnMarkers v2 with its transaction version."""
        broker = self.broker
        results: dict[tuple[str, int], int] = {}
        remote: dict[int, list[tuple[str, int]]] = defaultdict(list)
        local: list[tuple[str, int]] = []
        me, store, replicas = broker.broker_id, broker.store, broker.replicas
        topics: dict[str, TopicState | None] = {}  # a transaction's partitions: many, few topics
        for topic, p in partitions:
            state = topics[topic] if topic in topics else topics.setdefault(
                topic, store.topic(topic))
            pstate = state.partitions.get(p) if state is not None else None
            if pstate is None:
                results[(topic, p)] = ErrorCode.unknown_topic_or_partition
                continue
            hosted = replicas.get(topic, p)
            if (hosted is not None and hosted.is_leader) or pstate.leader == me:
                local.append((topic, p))
            elif pstate.leader < 0:
                results[(topic, p)] = ErrorCode.not_leader_or_follower
            else:
                remote[pstate.leader].append((topic, p))
        appended, unreplicated = append_markers(broker, marker, local)
        results.update(appended)
        remote_sends = [self._send(leader, tps, marker) for leader, tps in remote.items()]
        if not unreplicated and not remote_sends:
            return results
        local_codes, remote_results = await asyncio.gather(
            await_markers(broker, marker, unreplicated), asyncio.gather(*remote_sends)
        )
        results.update(local_codes)
        for answered in remote_results:
            results.update(answered)
        return results

    async def _send(self, leader: int, partitions: list[tuple[str, int]],
                    marker: TxnMarker) -> dict[tuple[str, int], int]:
        by_topic: dict[str, list[int]] = defaultdict(list)
        for topic, p in partitions:
            by_topic[topic].append(p)
        body = {
            "markers": [
                {
                    "producer_id": marker.producer_id,
                    "producer_epoch": marker.producer_epoch,
                    "transaction_result": marker.commit,
                    "topics": [
                        {"name": t, "partition_indexes": ps} for t, ps in by_topic.items()
                    ],
                    "coordinator_epoch": marker.coordinator_epoch,
                }
            ]
        }
        # v2 carries the transaction version (Kafka 4.2+); v1 is enough for the others
        version = 2 if marker.transaction_version >= 2 else 1
        if version == 2:
            body["markers"][0]["transaction_version"] = marker.transaction_version
        conn = self._connections.get(leader)
        if conn is None:
            broker = self.broker
            conn = self._connections[leader] = BrokerConnection(
                broker.store, leader, f"samsa-txn-markers-{broker.broker_id}",
                timeout_s=MARKER_REPLICATION_S + 5,
            )
        not_sent: dict[tuple[str, int], int] = {
            tp: ErrorCode.not_leader_or_follower for tp in partitions
        }
        try:
            response = await conn.request(WRITE_TXN_MARKERS, version, body)
        except BrokerUnavailable as exc:
            now = time.monotonic()
            quiet = now - _unavailable_logged.get(leader, -UNAVAILABLE_LOG_INTERVAL_S)
            level = logging.INFO if quiet >= UNAVAILABLE_LOG_INTERVAL_S else logging.DEBUG
            if level == logging.INFO:
                _unavailable_logged[leader] = now
            log.log(level, "WriteTxnMarkers to broker %d failed (retrying): %s", leader, exc)
            return not_sent
        out = not_sent
        for answered in response.markers:
            for t in answered.topics:
                for pr in t.partitions:
                    out[(t.name, pr.partition_index)] = int(pr.error_code)
        return out
