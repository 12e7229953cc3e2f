"""The group coordinator: classic, consumer-protocol (KIP-848) and share (KIP-932) groups and
committed offsets in __consumer_offsets, as a facade over its parts.

One `GroupCoordinator` per broker serves the groups of the `__consumer_offsets` partitions
this broker leads. Each part owns its state: `ClassicGroups` (classic/groups.py) the classic
groups and, in them, every group's committed offsets; `ConsumerGroups` (consumer/groups.py)
the consumer-protocol groups; `ShareGroups` (share/groups.py) the share groups;
`ConsumerMigration` (consumer/migration.py) converts between classic and consumer groups,
`ClassicMembers` (consumer/classic_members.py) serves the classic members of consumer groups;
`GroupOffsets` (offsets.py) commits, fetches and expires offsets; and `GroupPartitions`
(partitions.py) knows which partitions are loaded here and writes to them. This module loads
a partition through the coordinator runtime's `Loads` (replaying its records into the parts,
retried and fenced to the leader epoch; COORDINATOR_LOAD_IN_PROGRESS is answered meanwhile),
unloads it when leadership moves away, and answers the requests about groups of any type
(list, describe, delete).

Group state changes happen synchronously on the event loop (no locks needed); JoinGroup and
SyncGroup requests that must wait are parked as futures, completed by a state transition or by
a timer (`loop.call_later`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from samsa.config.schema import BrokerConfig
from samsa.coordinator.internal_log import InternalTopic, ReplayedMarker
from samsa.coordinator.ports import InternalLogHost, TopicsView
from samsa.coordinator.runtime import Loaded, Loads, Tasks, replay
from samsa.protocol.errors import ErrorCode

from .classic.groups import ClassicGroups
from .classic.model import ClassicGroup, GroupState
from .common import OFFSETS_TOPIC, GroupError, now_ms
from .consumer.classic_members import ClassicMembers
from .consumer.groups import ConsumerGroups
from .consumer.migration import ConsumerMigration
from .consumer.model import ConsumerGroup
from .consumer.records import decode_consumer_key
from .offsets import GroupOffsets
from .partitions import GroupPartitions
from .records import (
    GroupKey,
    OffsetKey,
    RecordFormatError,
    decode_key,
    group_metadata_key,
    offset_commit_key,
)
from .share.groups import ShareGroups
from .share.model import ShareGroup
from .share.records import decode_share_key
from .streams.groups import StreamsGroups

log = logging.getLogger(__name__)


class GroupCoordinator:
    def __init__(self, host: InternalLogHost, cfg: BrokerConfig,
                 topics: TopicsView | None = None) -> None:
        self.partitions = GroupPartitions(host, cfg, topics)
        self.partitions.load_led = self._load_led_partitions
        self.classic = ClassicGroups(self.partitions, cfg)
        self.consumer = ConsumerGroups(self.partitions, cfg, self.classic)
        self.share = ShareGroups(self.partitions, cfg, self.classic, self.consumer)
        self.streams = StreamsGroups(self.partitions, cfg)
        self.streams.other_type = self._other_than_streams
        self.classic.streams = self.consumer.streams = self.streams
        self.migration = ConsumerMigration(self.partitions, self.consumer, self.classic)
        self.classic_members = ClassicMembers(self.partitions, self.consumer, self.migration)
        self.offsets = GroupOffsets(self.partitions, cfg, self.classic, self.consumer)
        self.offsets.streams = self.streams
        self.classic.consumer = self.consumer
        self.classic.classic_members = self.classic_members
        self.classic.share = self.share
        self.consumer.migration = self.migration
        self.consumer.share = self.share
        # group id -> (monotonic expiry, its consumer.* configs): kept by the request handler
        self.group_config_cache: dict[str, tuple[float, dict[str, str]]] = {}
        self._tasks = Tasks("group coordinator")
        self._stopping = False
        # a failed load is retried and never served: with part of a partition's records
        # missing, a group would be answered from a stale generation and offsets
        self.loading: Loads[int] = Loads(self.partitions.topic, self._tasks, self._read,
                                         self._install, stopping=lambda: self._stopping,
                                         serving="groups")
        self.partitions.loading = self.loading
        # the requests, answered by the part that owns what they ask about
        self.join_group = self.classic.join.join_group
        self.sync_group = self.classic.sync_group
        self.heartbeat = self.classic.heartbeat
        self.leave_group = self.classic.leave_group
        self.commit_offsets = self.offsets.commit_offsets
        self.fetch_offsets = self.offsets.fetch_offsets
        self.delete_offsets = self.offsets.delete_offsets
        self.expire_offsets = self.offsets.expire_offsets
        self.complete_transaction = self.offsets.complete_transaction
        self.consumer_group_heartbeat = self.consumer.heartbeat.consumer_group_heartbeat
        self.describe_consumer_group = self.consumer.describe_consumer_group
        self.share_group_heartbeat = self.share.share_group_heartbeat
        self.describe_share_group = self.share.describe_share_group
        self.share_member_known = self.share.share_member_known
        self.share_group_of = self.share.share_group_of
        self.update_share_offsets_topics = self.share.update_share_offsets_topics
        self.partition_for = self.partitions.partition_for
        self.coordinator_partition = self.partitions.coordinator_partition
        # the parts' state, for the handlers: containers and settings each part makes once in
        # its constructor and never rebinds, so a name here is the part's own object
        self.topic: InternalTopic = self.partitions.topic
        self.loaded: set[int] = self.partitions.loaded
        self.groups: dict[str, ClassicGroup] = self.classic.groups
        self.consumer_groups: dict[str, ConsumerGroup] = self.consumer.consumer_groups
        self.share_groups: dict[str, ShareGroup] = self.share.share_groups
        self.share_member_removed: list[Callable[[str, str], None]] = (
            self.share.share_member_removed)
        self.consumer_session_ms: int = self.consumer.consumer_session_ms
        self.consumer_heartbeat_ms: int = self.consumer.consumer_heartbeat_ms

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        if self.topic.exists():
            self._load_led_partitions()
        self._tasks.every(self.offsets.retention_check_ms / 1000,
                          lambda: self.expire_offsets(now_ms()), "offset expiration")

    async def stop(self) -> None:
        self._stopping = True
        await self._tasks.cancel_all()  # the loads among them
        self._unload_groups(None)

    async def ensure_topic(self) -> None:
        """Create __consumer_offsets on first use and load the partitions led here."""
        await self.topic.ensure_created()
        self._load_led_partitions()

    def _load_led_partitions(self) -> None:
        for p in self.topic.partitions():
            if p in self.loaded or p in self.loading:
                continue
            part = self.topic.replica(p)
            if part is None or not part.is_leader:
                continue
            if part.log_end_offset == part.log_start_offset:
                # nothing to replay: served at once (the first request of a new group's)
                self.loaded.add(p)
                log.info("loaded %s-%d (empty)", OFFSETS_TOPIC, p)
                continue
            self.loading.start(p)

    def on_leadership(self, p: int, is_leader: bool) -> None:
        """Leadership of `__consumer_offsets`-p moved here (load it) or away (unload it)."""
        if is_leader:
            self._load_led_partitions()
            return
        self.loading.cancel(p)
        self.loaded.discard(p)
        self.offsets.unload(p)
        self._unload_groups(p)

    def _unload_groups(self, p: int | None) -> None:
        """Forget the groups of partition p (all if None)."""
        self.consumer.unload_consumer_groups(p)
        self.share.unload_share_groups(p)
        self.streams.unload(p)
        self.classic.unload(p)

    def is_loading(self) -> bool:
        return bool(self.loading)

    # ------------------------------------------------------------------ loading
    async def _read(self, p: int) -> int:
        """Replay partition p into the parts; returns the number of records read. Each attempt
        starts afresh (a failed or fenced one may have left part of the partition's groups)."""
        self.offsets.forget_transactions(p)
        self._unload_groups(p)
        count = 0
        async for entry in replay(self.topic, p):
            count += 1
            if isinstance(entry, ReplayedMarker):
                self.offsets.complete_txn(p, entry.producer_id, entry.commit)
                continue
            if entry.key is None:
                continue
            try:
                self._replay_record(p, entry.offset, entry.key, entry.value,
                                    entry.producer_id if entry.transactional else -1)
            except (RecordFormatError, UnicodeDecodeError) as exc:
                log.warning("%s-%d offset %d: skipping undecodable record: %s",
                            OFFSETS_TOPIC, p, entry.offset, exc)
        return count

    def _install(self, p: int, loaded: Loaded[int]) -> None:
        """Partition p is read at the epoch still led here: its groups are served."""
        self.offsets.complete_deferred(p)
        self.classic.loaded_partition(p)
        self.consumer.consumer_groups_loaded(p)
        self.share.share_groups_loaded(p)
        self.streams.loaded(p)
        self.loaded.add(p)
        log.info("loaded %s-%d (%d records) in %.0f ms%s", OFFSETS_TOPIC, p, loaded.state,
                 loaded.took_ms(),
                 f" after {loaded.attempts} attempts" if loaded.attempts > 1 else "")

    def _replay_record(self, p: int, offset: int, key: bytes, value: bytes | None,
                       txn_pid: int) -> None:
        """One record of the partition, to the part whose record it is."""
        k = decode_key(key)
        if isinstance(k, OffsetKey):
            self.offsets.replay(p, offset, k, value, txn_pid)
        elif isinstance(k, GroupKey):
            self.classic.replay(p, k, value)
        elif k is None:
            ck = decode_consumer_key(key)
            if ck is not None:
                self.consumer.replay_consumer(p, ck, value)
                return
            sk = decode_share_key(key)
            if sk is not None:
                self.share.replay_share(p, sk, value)
                return
            self.streams.replay(p, key, value)

    def _other_than_streams(self, group_id: str) -> bool:
        """Whether `group_id` is a group of another type (its streams heartbeats are refused:
        the group ids of all types are one namespace)."""
        classic = self.groups.get(group_id)
        return (group_id in self.consumer_groups or group_id in self.share_groups
                or (classic is not None and bool(classic.members)))

    # ------------------------------------------------------------------ admin
    def list_groups(self, states: Iterable[str] = (),
                    types: Iterable[str] = ()) -> tuple[ErrorCode, list[dict[str, Any]]]:
        states_l = {s.lower() for s in states}
        types_l = {t.lower() for t in types}
        out = []
        if not types_l or "consumer" in types_l:
            out += self.consumer.list_consumer_groups(states_l)
        if not types_l or "share" in types_l:
            out += self.share.list_share_groups(states_l)
        if not types_l or "streams" in types_l:
            out += self.streams.list_groups(states_l)
        if types_l and "classic" not in types_l:
            return (ErrorCode.coordinator_load_in_progress if self.loading
                    else ErrorCode.none), out
        for group in self.groups.values():
            if group.partition not in self.loaded or group.is_in(GroupState.DEAD):
                continue
            if group.group_id in self.consumer_groups or group.group_id in self.streams.groups:
                continue  # only the offsets of a consumer group
            if states_l and group.state.value.lower() not in states_l:
                continue
            out.append({"group_id": group.group_id, "protocol_type": group.protocol_type or "",
                        "group_state": group.state.value, "group_type": "classic"})
        return (ErrorCode.coordinator_load_in_progress if self.loading else ErrorCode.none), out

    def describe_group(self, group_id: str) -> dict[str, Any]:
        try:
            self.coordinator_partition(group_id)
        except GroupError as exc:
            return {"error_code": exc.error_code, "group_id": group_id, "group_state": "",
                    "protocol_type": "", "protocol_data": "", "members": []}
        group = self.groups.get(group_id)
        if group is None or group_id in self.consumer_groups or group_id in self.streams.groups:
            # Kafka (DescribeGroups before v6): a group that is not a classic one is Dead
            return {"error_code": ErrorCode.none, "group_id": group_id, "group_state": "Dead",
                    "protocol_type": "", "protocol_data": "", "members": []}
        stable = group.is_in(GroupState.STABLE)
        return {
            "error_code": ErrorCode.none,
            "group_id": group_id,
            "group_state": group.state.value,
            "protocol_type": group.protocol_type or "",
            "protocol_data": (group.protocol_name or "") if stable else "",
            "members": [
                {"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                 "client_id": m.client_id, "client_host": m.client_host,
                 "member_metadata": m.metadata(group.protocol_name) if stable else b"",
                 "member_assignment": m.assignment if stable else b""}
                for m in group.members.values()
            ],
        }

    async def delete_group(self, group_id: str) -> ErrorCode:
        try:
            p = self.coordinator_partition(group_id)
        except GroupError as exc:
            return exc.error_code
        share_group = self.share_groups.get(group_id)
        if share_group is not None:
            return await self.share.delete_share_group(share_group)
        group = self.groups.get(group_id)
        consumer_group = self.consumer_groups.get(group_id)
        if consumer_group is not None:
            code = self.consumer.delete_consumer_group(consumer_group)
            if code != ErrorCode.none or group is None:
                return code
        streams_group = self.streams.groups.get(group_id)
        if streams_group is not None:
            code = self.streams.delete(streams_group)
            if code != ErrorCode.none or group is None:
                return code
        if group is None or group.is_in(GroupState.DEAD):
            return ErrorCode.group_id_not_found
        if not group.is_in(GroupState.EMPTY):
            return ErrorCode.non_empty_group
        records: list[tuple[bytes, bytes | None]] = [
            (offset_commit_key(group_id, t, pn), None) for t, pn in group.offsets
        ]
        records.append((group_metadata_key(group_id), None))
        try:
            self.partitions.append(p, records)
        except GroupError as exc:
            return exc.error_code
        self.classic.rebalance.cancel_timers(group)
        group.transition(GroupState.DEAD, now_ms())
        group.offsets.clear()
        del self.groups[group_id]
        return ErrorCode.none
