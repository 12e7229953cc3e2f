"""The consumer groups' server-side assignors (Kafka's group.consumer.assignors): `uniform`
(sticky, as even as the subscriptions allow) and `range`, over the subscribed topics."""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from .model import Assignment, TopicsMetadata

UNIFORM = "uniform"
RANGE = "range"
# Kafka's class names of the two built-in assignors (group.consumer.assignors accepts either).
ASSIGNOR_CLASSES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": UNIFORM,
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": RANGE,
}


def assign(assignor: str, subscriptions: Mapping[str, set[str]], topics: TopicsMetadata,
           previous: Mapping[str, Assignment]) -> dict[str, Assignment]:
    """The target assignment: member id -> assignment, for members subscribed to topic names
    (`subscriptions`), over the topics that exist (`topics`)."""
    if assignor == RANGE:
        return range_assign(subscriptions, topics)
    return uniform_assign(subscriptions, topics, previous)


def range_assign(subscriptions: Mapping[str, set[str]],
                 topics: TopicsMetadata) -> dict[str, Assignment]:
    """Kafka's RangeAssignor: per topic, its subscribers (by member id) get consecutive ranges
    of its partitions, the first `partitions % subscribers` one more."""
    out: dict[str, Assignment] = {m: {} for m in subscriptions}
    for name in sorted({t for s in subscriptions.values() for t in s}):
        meta = topics.get(name)
        if meta is None:
            continue
        topic_id, count = meta
        members = sorted(m for m, s in subscriptions.items() if name in s)
        per, extra = divmod(count, len(members))
        start = 0
        for i, m in enumerate(members):
            n = per + (1 if i < extra else 0)
            if n:
                out[m][topic_id] = set(range(start, start + n))
            start += n
    return out


def uniform_assign(subscriptions: Mapping[str, set[str]], topics: TopicsMetadata,
                   previous: Mapping[str, Assignment]) -> dict[str, Assignment]:
    """Kafka's UniformAssignor goals: every partition of a subscribed topic to one of its
    subscribers, partition counts as even as the subscriptions allow, and as few moves from
    the previous target assignment as that needs (sticky)."""
    members = sorted(subscriptions)
    out: dict[str, Assignment] = {m: {} for m in members}
    count: dict[str, int] = dict.fromkeys(members, 0)
    by_id = {tid: (name, n) for name, (tid, n) in topics.items()}
    subscribers: dict[uuid.UUID, list[str]] = {}
    for name, (tid, _) in topics.items():
        subs = [m for m in members if name in subscriptions[m]]
        if subs:
            subscribers[tid] = subs
    all_partitions = sorted(
        ((tid, p) for tid in subscribers for p in range(by_id[tid][1])),
        key=lambda tp: (by_id[tp[0]][0], tp[1]))
    total_members = len([m for m in members if subscriptions[m]])
    # In a homogeneous group nobody needs more than the ceiling of the average: cap the
    # partitions a member keeps so that the rest can be spread.
    cap = -(-len(all_partitions) // total_members) if total_members else 0
    taken: set[tuple[uuid.UUID, int]] = set()
    for m in members:
        for tid, ps in sorted(previous.get(m, {}).items(), key=lambda kv: str(kv[0])):
            if tid not in subscribers or m not in subscribers[tid]:
                continue
            for p in sorted(ps):
                tp = (tid, p)
                if p >= by_id[tid][1] or tp in taken or count[m] >= cap:
                    continue
                out[m].setdefault(tid, set()).add(p)
                taken.add(tp)
                count[m] += 1
    for tp in all_partitions:
        if tp in taken:
            continue
        m = min(subscribers[tp[0]], key=lambda x: (count[x], x))
        out[m].setdefault(tp[0], set()).add(tp[1])
        count[m] += 1
    # Balance what the subscriptions allow: move a partition from a member to a subscriber
    # of its topic with at least two fewer, until no such move is left.
    moved = True
    rounds = 0
    while moved and rounds < 10 * max(len(all_partitions), 1):
        moved = False
        rounds += 1
        for m in sorted(members, key=lambda x: (-count[x], x)):
            for tid, ps in sorted(out[m].items(), key=lambda kv: str(kv[0])):
                target = min(subscribers[tid], key=lambda x: (count[x], x))
                if count[target] + 2 > count[m] or not ps:
                    continue
                p = max(ps)
                ps.discard(p)
                out[target].setdefault(tid, set()).add(p)
                count[m] -= 1
                count[target] += 1
                moved = True
                break
            if moved:
                break
    return {m: {t: ps for t, ps in a.items() if ps} for m, a in out.items()}
