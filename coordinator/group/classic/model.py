"""A classic-protocol consumer group: members, generation, state, rebalance bookkeeping.

Pure state; the timers and the futures of parked JoinGroup/SyncGroup requests are driven by
`GroupCoordinator` (coordinator.py), which owns every `ClassicGroup`.
"""

from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass, field
from typing import Any

from ..records import GroupValue, MemberValue, OffsetValue


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]  # (name, metadata) in the member's preference order
    assignment: bytes = b""
    join_future: asyncio.Future[dict[str, Any]] | None = None
    sync_future: asyncio.Future[dict[str, Any]] | None = None
    heartbeat_timer: asyncio.TimerHandle | None = None
    is_new: bool = False

    def metadata(self, protocol: str | None) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols

    @property
    def awaiting_join(self) -> bool:
        return self.join_future is not None and not self.join_future.done()


@dataclass(slots=True)
class CommittedOffset:
    value: OffsetValue
    record_offset: int  # offset of the record in __consumer_offsets (newest wins)


@dataclass(eq=False)
class ClassicGroup:
    group_id: str
    partition: int  # its __consumer_offsets partition
    state: GroupState = GroupState.EMPTY
    state_timestamp: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    generation: int = 0
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    pending_members: set[str] = field(default_factory=set)  # MEMBER_ID_REQUIRED handed out
    offsets: dict[tuple[str, int], CommittedOffset] = field(default_factory=dict)
    # producer id -> {(topic, partition): offset} written by TxnOffsetCommit, not yet decided
    pending_txn_offsets: dict[int, dict[tuple[str, int], CommittedOffset]] = field(
        default_factory=dict
    )
    join_timer: asyncio.TimerHandle | None = None
    sync_timer: asyncio.TimerHandle | None = None
    initial_join: bool = False  # the join phase is the delayed first one of an empty group
    join_remaining_ms: int = 0  # how much longer the initial join may still be extended
    new_member_added: bool = False

    # ---- queries -------------------------------------------------------------------
    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def transition(self, state: GroupState, now_ms: int) -> None:
        self.state = state
        self.state_timestamp = now_ms

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def is_pending(self, member_id: str) -> bool:
        return member_id in self.pending_members

    def static_member_id(self, instance_id: str | None) -> str | None:
        return self.static_members.get(instance_id) if instance_id is not None else None

    def all_members_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def supports_protocols(self, protocol_type: str, names: list[str]) -> bool:
        if not self.members:
            return bool(protocol_type) and bool(names)
        if protocol_type != self.protocol_type:
            return False
        return bool(self.candidate_protocols() & set(names))

    def candidate_protocols(self) -> set[str]:
        sets = [set(m.protocol_names()) for m in self.members.values()]
        return set.intersection(*sets) if sets else set()

    def select_protocol(self) -> str | None:
        candidates = self.candidate_protocols()
        if not candidates:
            return None
        votes: dict[str, int] = {}
        for m in self.members.values():
            choice = next(n for n in m.protocol_names() if n in candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return max(votes, key=lambda n: votes[n])

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to (consumer protocol); None if not knowable."""
        from ..records import subscribed_topics

        if self.protocol_type != "consumer" or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            topics |= subscribed_topics(m.metadata(self.protocol_name))
        return topics

    # ---- membership ----------------------------------------------------------------
    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        self.pending_members.discard(member_id)
        if member is None:
            return None
        if member.heartbeat_timer is not None:
            member.heartbeat_timer.cancel()
            member.heartbeat_timer = None
        if (
            member.group_instance_id is not None
            and self.static_members.get(member.group_instance_id) == member_id
        ):
            del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    # ---- persistence ---------------------------------------------------------------
    def to_value(self, now_ms: int) -> GroupValue:
        return GroupValue(
            protocol_type=self.protocol_type or "",
            generation=self.generation,
            protocol=self.protocol_name,
            leader=self.leader_id,
            current_state_timestamp=self.state_timestamp if self.state_timestamp >= 0 else now_ms,
            members=[
                MemberValue(
                    m.member_id, m.group_instance_id, m.client_id, m.client_host,
                    m.rebalance_timeout_ms, m.session_timeout_ms,
                    m.metadata(self.protocol_name), m.assignment,
                )
                for m in self.members.values()
            ],
        )

    def load_value(self, v: GroupValue) -> None:
        self.protocol_type = v.protocol_type or None
        self.generation = v.generation
        self.protocol_name = v.protocol
        self.leader_id = v.leader
        self.state_timestamp = v.current_state_timestamp
        self.members.clear()
        self.static_members.clear()
        for mv in v.members:
            m = Member(
                mv.member_id, mv.group_instance_id, mv.client_id, mv.client_host,
                mv.rebalance_timeout if mv.rebalance_timeout >= 0 else mv.session_timeout,
                mv.session_timeout, v.protocol_type,
                [(v.protocol or "", mv.subscription)], mv.assignment,
            )
            self.members[m.member_id] = m
            if m.group_instance_id is not None:
                self.static_members[m.group_instance_id] = m.member_id
        self.state = GroupState.STABLE if self.members else GroupState.EMPTY
