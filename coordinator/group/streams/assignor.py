"""The streams group's task assignor: Kafka's "sticky" (StickyTaskAssignor), without warm-up
tasks. Every task goes to one member as active; a member keeps the tasks of its previous
target assignment while that keeps the load balanced (at most ceil(tasks / members) each),
and the rest go to the least loaded members, a process's members spread alike. Then each task
of a stateful subtopology gets `standby_replicas` standbys, each on a process that has neither
its active nor another standby of it: its previous standby owners first, else the least
loaded members.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Set

from .model import TaskMap, Tasks, task_map


def assign(members: Mapping[str, tuple[str, TaskMap]], tasks: Mapping[str, int],
           standby_replicas: int = 0, stateful: Set[str] = frozenset(),
           previous_standby: Mapping[str, TaskMap] | None = None) -> dict[str, Tasks]:
    """members: member id -> (process id, its previous target active tasks); tasks:
    subtopology id -> task count; stateful: the subtopologies with state (only their tasks
    have standbys); previous_standby: member id -> its previous standby tasks. Returns each
    member's new target assignment."""
    if not members:
        return {}
    active = _assign_active(members, tasks)
    if standby_replicas <= 0:
        return {m: Tasks(active=task_map(a)) for m, a in active.items()}
    standby = _assign_standby(members, active, standby_replicas, stateful,
                              previous_standby or {})
    return {m: Tasks(active=task_map(active[m]), standby=task_map(standby[m]))
            for m in members}


def _assign_active(members: Mapping[str, tuple[str, TaskMap]], tasks: Mapping[str, int]
                   ) -> dict[str, dict[str, set[int]]]:
    every = [(s, p) for s in sorted(tasks) for p in range(tasks[s])]
    capacity = math.ceil(len(every) / len(members)) if every else 0
    given: dict[str, list[tuple[str, int]]] = {m: [] for m in members}
    free = set(every)
    for m in sorted(members):  # stickiness first: a member keeps what it had
        for s, ps in sorted(members[m][1].items()):
            for p in sorted(ps):
                if (s, p) in free and len(given[m]) < capacity:
                    given[m].append((s, p))
                    free.discard((s, p))
    per_process: dict[str, int] = {}
    for m, owned in given.items():
        process = members[m][0]
        per_process[process] = per_process.get(process, 0) + len(owned)
    for task in every:
        if task not in free:
            continue
        m = min(given, key=lambda m: (len(given[m]), per_process[members[m][0]], m))
        given[m].append(task)
        per_process[members[m][0]] += 1
    return {m: _by_subtopology(owned) for m, owned in given.items()}


def _by_subtopology(tasks: list[tuple[str, int]]) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for s, p in tasks:
        out.setdefault(s, set()).add(p)
    return out


def _assign_standby(members: Mapping[str, tuple[str, TaskMap]],
                    active: Mapping[str, dict[str, set[int]]], replicas: int,
                    stateful: Set[str], previous: Mapping[str, TaskMap]
                    ) -> dict[str, dict[str, set[int]]]:
    load = {m: sum(len(ps) for ps in active[m].values()) for m in members}
    out: dict[str, list[tuple[str, int]]] = {m: [] for m in members}
    owner = {(s, p): m for m, ts in active.items() for s, ps in ts.items() for p in ps
             if s in stateful}
    for task in sorted(owner):
        taken = {members[owner[task]][0]}  # processes that have the task already
        for _ in range(replicas):
            free = [m for m in members if members[m][0] not in taken]
            if not free:
                break  # fewer processes than copies: Kafka leaves the rest unassigned
            before = [m for m in free if task[1] in previous.get(m, {}).get(task[0], ())]
            m = min(before or free, key=lambda m: (load[m], m))
            out[m].append(task)
            load[m] += 1
            taken.add(members[m][0])
    return {m: _by_subtopology(ts) for m, ts in out.items()}
