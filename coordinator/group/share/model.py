"""A share group (KIP-932): its members, epochs and assignment, and Kafka's simple assignor.

Unlike a consumer group, a share group's partitions are not owned: several members may be
assigned one partition (the partition's leader hands each record to one of them at a time),
so there is no revocation and a member takes the group's new assignment at once. The group
epoch is bumped by every change of members or subscriptions; the assignment is recomputed
while the assignment epoch is behind it.
"""

from __future__ import annotations

import asyncio
import enum
import uuid
from dataclasses import dataclass, field

# topic id -> partitions
Assignment = dict[uuid.UUID, set[int]]
# topic name -> (topic id, partition count)
TopicsMetadata = dict[str, tuple[uuid.UUID, int]]

SIMPLE = "simple"
LEAVE_GROUP_MEMBER_EPOCH = -1


class ShareGroupState(enum.Enum):
    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(slots=True)
class ShareMember:
    member_id: str
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: list[str] = field(default_factory=list)
    member_epoch: int = 0
    previous_member_epoch: int = 0
    assigned: Assignment = field(default_factory=dict)
    session_timer: asyncio.TimerHandle | None = None


@dataclass(slots=True)
class ShareGroup:
    group_id: str
    partition: int
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    target: dict[str, Assignment] = field(default_factory=dict)
    dead: bool = False
    # the topics whose share-partitions the group may have state of (subscribed to since it
    # was created here, or given offsets): DescribeShareGroupOffsets without topics lists them
    offsets_topics: set[str] = field(default_factory=set)
    # the group's records as last written to `__consumer_offsets` (key -> value): a change
    # writes what differs from them
    persisted: dict[bytes, bytes] = field(default_factory=dict)

    def state(self) -> ShareGroupState:
        if self.dead:
            return ShareGroupState.DEAD
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY

    def subscribed(self) -> set[str]:
        out: set[str] = set()
        for m in self.members.values():
            out.update(m.subscribed_topic_names)
        return out


def simple_assign(members: dict[str, list[str]], topics: TopicsMetadata) -> dict[str, Assignment]:
    """Kafka's simple share assignor for members `member id -> subscribed topic names`: each
    topic's partitions are spread over its subscribers round robin; when a topic has fewer
    partitions than subscribers, its partitions are handed out again so that every subscriber
    gets one (a partition is then shared). Deterministic: members in id order."""
    out: dict[str, Assignment] = {m: {} for m in members}
    for name in sorted(topics):
        tid, count = topics[name]
        subscribers = sorted(m for m, subs in members.items() if name in subs)
        if not subscribers or count <= 0:
            continue
        slots = max(count, len(subscribers))
        for i in range(slots):
            out[subscribers[i % len(subscribers)]].setdefault(tid, set()).add(i % count)
    return out
