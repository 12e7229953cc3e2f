"""Topic lifecycle: create (explicitly or on first use), delete, add partitions, change configs.

Validation answers with Kafka's error codes; every change goes to the metadata store first and
is then materialized by the replica manager.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any

from kazoo.exceptions import NodeExistsError

from samsa.config.topic import InvalidConfigError, effective_topic_config, validate_topic_configs
from samsa.protocol.errors import ErrorCode, KafkaError
from samsa.protocol.uuids import random_kafka_uuid
from samsa.storage.config import LogConfig

from .metadata_store import MetadataStore, PartitionState, TopicState

if TYPE_CHECKING:
    from ..replication.replica_manager import ReplicaManager

log = logging.getLogger(__name__)

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_NAME_LENGTH = 249
# Kafka's controller writes at most this many records for one request (QuorumController's
# MAX_RECORDS_PER_USER_OP): one per partition, and a topic's own and its configs' records.
MAX_RECORDS_PER_USER_OP = 10000


class TopicError(KafkaError):
    """A topic change refused with `error_code` and the message Kafka gives for it."""

    def __init__(self, error_code: ErrorCode | int, message: str) -> None:
        super().__init__(message, ErrorCode(error_code))
        self.message = message


def validate_topic_name(name: str | None) -> None:
    if not name:
        raise TopicError(
            ErrorCode.invalid_topic_exception,
            "Topic name is illegal, it can't be empty",
        )
    if name in (".", ".."):
        raise TopicError(ErrorCode.invalid_topic_exception, 'Topic name cannot be "." or ".."')
    if len(name) > MAX_NAME_LENGTH:
        raise TopicError(
            ErrorCode.invalid_topic_exception,
            f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters",
        )
    if not _LEGAL.match(name):
        raise TopicError(
            ErrorCode.invalid_topic_exception,
            f'Topic name "{name}" is illegal, it contains a character other than ASCII '
            "alphanumerics, '.', '_' and '-'",
        )


class TopicAdmin:
    def __init__(self, broker_config: Any, store: MetadataStore, replicas: ReplicaManager) -> None:
        self.config = broker_config
        self.store = store
        self.replicas = replicas

    # -- configs -----------------------------------------------------------------------
    def effective_properties(self, topic: TopicState) -> dict[str, object]:
        return effective_topic_config(topic.configs, self.config)

    def validate_configs(self, overrides: dict[str, str]) -> None:
        try:
            validate_topic_configs(overrides)
        except InvalidConfigError as exc:
            raise TopicError(ErrorCode.invalid_config, str(exc)) from None

    def log_config(self, topic: TopicState) -> LogConfig:
        return LogConfig.from_properties(self.effective_properties(topic))

    # -- lifecycle -----------------------------------------------------------------------
    async def create(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        assignments: dict[int, list[int]] | None = None,
        configs: dict[str, str | None] | None = None,
        *,
        validate_only: bool = False,
        internal: bool = False,
    ) -> TopicState:
        validate_topic_name(name)
        if self.store.topic(name) is not None:
            raise TopicError(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")
        brokers = sorted(b.broker_id for b in self.store.brokers())
        if assignments:
            if num_partitions != -1 or replication_factor != -1:
                raise TopicError(
                    ErrorCode.invalid_request,
                    "Both numPartitions or replicationFactor and replicasAssignments were set. "
                    "Both cannot be used at the same time.",
                )
            placement = self._check_assignments(assignments, brokers, 0)
        else:
            if num_partitions == -1:
                num_partitions = self.config["num.partitions"]
            if replication_factor == -1:
                replication_factor = self.config["default.replication.factor"]
            if num_partitions <= 0:
                raise TopicError(
                    ErrorCode.invalid_partitions,
                    "Number of partitions must be larger than 0.",
                )
            if replication_factor <= 0:
                raise TopicError(
                    ErrorCode.invalid_replication_factor,
                    "Replication factor must be larger than 0."
                )
            if replication_factor > len(brokers):
                raise TopicError(
                    ErrorCode.invalid_replication_factor,
                    f"Unable to replicate the partition {replication_factor} time(s): The target "
                    f"replication factor of {replication_factor} cannot be reached because only "
                    f"{len(brokers)} broker(s) are registered.",
                )
            _check_records(1 + len(configs or {}) + num_partitions)
            placement = assign_replicas(self._racks(), num_partitions, replication_factor, 0)
        overrides = {k: v for k, v in (configs or {}).items() if v is not None}
        try:
            validate_topic_configs(overrides)
        except InvalidConfigError as exc:
            raise TopicError(ErrorCode.invalid_config, str(exc)) from None
        topic = TopicState(
            name=name,
            topic_id=random_kafka_uuid(),
            partitions={
                p: PartitionState(replicas=r, leader=r[0], leader_epoch=0, isr=list(r))
                for p, r in placement.items()
            },
            configs=overrides,
            internal=internal or name in INTERNAL_TOPICS,
        )
        if validate_only:
            return topic
        try:
            await self.store.create_topic(topic)
        except NodeExistsError:  # another broker created it first (ZooKeeper)
            raise TopicError(
                ErrorCode.topic_already_exists,
                f"Topic '{name}' already exists.",
            ) from None
        self.replicas.materialize(topic, defer=True)
        log.info(
            "created topic %s with %d partitions, replication factor %d",
            name,
            len(placement),
            len(next(iter(placement.values()))),
        )
        return topic

    async def delete(self, name: str) -> TopicState:
        topic = self.store.topic(name)
        if topic is None:
            raise TopicError(
                ErrorCode.unknown_topic_or_partition,
                "This server does not host this topic-partition."
            )
        if not self.config["delete.topic.enable"]:
            raise TopicError(ErrorCode.topic_deletion_disabled, "Topic deletion is disabled.")
        if topic.internal:
            raise TopicError(
                ErrorCode.invalid_topic_exception,
                f"Cannot delete internal topic {name}",
            )
        await self.store.delete_topic(name)
        self.replicas.remove_topic(name)
        log.info("deleted topic %s", name)
        return topic

    async def create_partitions(
        self, name: str, count: int, assignments: list[list[int]] | None, validate_only: bool
    ) -> None:
        topic = self.store.topic(name)
        if topic is None:
            raise TopicError(
                ErrorCode.unknown_topic_or_partition,
                "This server does not host this topic-partition."
            )
        if any(s.adding or s.removing for s in topic.partitions.values()):
            raise TopicError(
                ErrorCode.reassignment_in_progress,
                f"A partition reassignment is in progress for the topic '{name}'.",
            )
        current = len(topic.partitions)
        if count < current:
            raise TopicError(
                ErrorCode.invalid_partitions,
                f"Topic currently has {current} partitions, which is higher than the requested "
                f"{count}.",
            )
        if count == current:
            raise TopicError(
                ErrorCode.invalid_partitions,
                f"Topic already has {current} partitions.",
            )
        brokers = sorted(b.broker_id for b in self.store.brokers())
        rf = len(next(iter(topic.partitions.values())).replicas)
        if assignments:
            if len(assignments) != count - current:
                raise TopicError(
                    ErrorCode.invalid_replica_assignment,
                    f"Increasing the number of partitions by {count - current} but "
                    f"{len(assignments)} assignments provided.",
                )
            placement = self._check_assignments(
                {current + i: a for i, a in enumerate(assignments)}, brokers, current
            )
        else:
            _check_records(count - current)
            placement = assign_replicas(self._racks(), count - current, rf, current)
            placement = {current + i: r for i, r in enumerate(placement.values())}
        if validate_only:
            return
        for p, r in placement.items():
            topic.partitions[p] = PartitionState(
                replicas=r, leader=r[0], leader_epoch=0, isr=list(r)
            )
        await self.store.update_topic(topic)
        self.replicas.materialize(topic, defer=True)
        log.info("topic %s now has %d partitions", name, count)

    async def set_configs(self, name: str, overrides: dict[str, str]) -> None:
        topic = self.store.topic(name)
        if topic is None:
            raise TopicError(
                ErrorCode.unknown_topic_or_partition,
                "This server does not host this topic-partition."
            )
        try:
            validate_topic_configs(overrides)
        except InvalidConfigError as exc:
            raise TopicError(ErrorCode.invalid_config, str(exc)) from None
        topic.configs = dict(overrides)
        await self.store.update_topic(topic)
        self.replicas.reconfigure(topic)

    def _racks(self) -> dict[int, str | None]:
        """Each registered broker's broker.rack (None: not set)."""
        return {b.broker_id: b.rack for b in self.store.brokers()}

    @staticmethod
    def _check_assignments(
        assignments: dict[int, list[int]], brokers: list[int], first: int
    ) -> dict[int, list[int]]:
        expected = list(range(first, first + len(assignments)))
        if sorted(assignments) != expected:
            raise TopicError(
                ErrorCode.invalid_replica_assignment,
                "Partitions should be a consecutive 0-based integer sequence",
            )
        sizes = {len(r) for r in assignments.values()}
        if len(sizes) != 1 or 0 in sizes:
            raise TopicError(
                ErrorCode.invalid_replica_assignment,
                "All partitions should have the same number of replicas"
            )
        for p, replicas in assignments.items():
            if len(set(replicas)) != len(replicas):
                raise TopicError(
                    ErrorCode.invalid_replica_assignment,
                    f"Duplicate brokers not allowed in replica assignment of partition {p}",
                )
            unknown = [b for b in replicas if b not in brokers]
            if unknown:
                raise TopicError(
                    ErrorCode.invalid_replica_assignment,
                    f"Unknown broker(s) {unknown} in replica assignment"
                )
        return dict(assignments)


def spread_replicas(
    brokers: list[int], partitions: int, replication_factor: int, start: int
) -> dict[int, list[int]]:
    """Round-robin leaders with followers shifted after them (Kafka's rack-unaware spread)."""
    n = len(brokers)
    placement: dict[int, list[int]] = {}
    for i in range(partitions):
        first = (start + i) % n
        placement[i] = [brokers[(first + j) % n] for j in range(replication_factor)]
    return placement


def _check_records(records: int) -> None:
    """Kafka's answer to an operation of more records than its controller writes at once
    (BoundedListTooLongException): refused before anything as large is allocated."""
    if records > MAX_RECORDS_PER_USER_OP:
        raise TopicError(ErrorCode.policy_violation,
                         "Unable to perform excessively large batch operation.")


def assign_replicas(
    racks: dict[int, str | None], partitions: int, replication_factor: int, start: int
) -> dict[int, list[int]]:
    """Replica placement of new partitions `start`.. (keys 0..partitions-1): rack-unaware
    when no broker has a broker.rack, else Kafka's AdminUtils.assignReplicasToBrokersRackAware
    (brokers without a rack count as one rack of their own)."""
    if all(r is None for r in racks.values()):
        return spread_replicas(sorted(racks), partitions, replication_factor, start)
    return _rack_aware(racks, partitions, replication_factor, start)


def _rack_alternated(racks: dict[int, str | None]) -> list[int]:
    """Kafka's getRackAlternatedBrokerList: the first broker of each rack (racks sorted), then
    the second of each, ..."""
    by_rack: dict[str, list[int]] = {}
    for broker, rack in sorted(racks.items()):
        by_rack.setdefault(rack or "", []).append(broker)
    queues = [by_rack[r] for r in sorted(by_rack)]
    out: list[int] = []
    depth = 0
    while len(out) < len(racks):
        out.extend(q[depth] for q in queues if depth < len(q))
        depth += 1
    return out


def _rack_aware(
    racks: dict[int, str | None], partitions: int, replication_factor: int, start: int
) -> dict[int, list[int]]:
    brokers = _rack_alternated(racks)
    n = len(brokers)
    num_racks = len({r or "" for r in racks.values()})

    def replica_index(first: int, shift: int, k: int) -> int:
        return (first + 1 + (shift + k) % (n - 1)) % n if n > 1 else first

    placement: dict[int, list[int]] = {}
    shift = 0
    for i in range(partitions):
        pid = start + i
        if pid > 0 and pid % n == 0:
            shift += 1
        first = pid % n
        leader = brokers[first]
        replicas = [leader]
        used_racks = {racks[leader] or ""}
        used = {leader}
        k = 0
        while len(replicas) < replication_factor:
            broker = brokers[replica_index(first, shift * num_racks, k)]
            rack = racks[broker] or ""
            # skip a rack that has a replica while another has none, and a broker that has
            # one while another has none
            if ((rack not in used_racks or len(used_racks) == num_racks)
                    and (broker not in used or len(used) == n)):
                replicas.append(broker)
                used_racks.add(rack)
                used.add(broker)
            k += 1
        placement[i] = replicas
    return placement
