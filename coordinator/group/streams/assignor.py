"""The streams group's task assignor: Kafka 4.4's "sticky" (StickyTaskAssignor), without
warm-up tasks. Every task goes to one member as active: first to its previous owner while that
member is under its share (the tasks left over the members left, rounded up), the tasks taken
partition by partition across the subtopologies; then to a previous standby owner with room;
the rest to the least loaded process's least loaded member. Then each task of a stateful
subtopology gets `standby_replicas` standbys, each on a process that has neither its active
nor another standby of it: its previous standby owners first, else the least loaded members.
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
    active = _assign_active(members, tasks, previous_standby or {})
    if standby_replicas <= 0:
        return {m: Tasks(active=task_map(a)) for m, a in active.items()}
    standby = _assign_standby(members, active, standby_replicas, stateful,
                              previous_standby or {})
    return {m: Tasks(active=task_map(active[m]), standby=task_map(standby[m]))
            for m in members}


def _assign_active(members: Mapping[str, tuple[str, TaskMap]], tasks: Mapping[str, int],
                   previous_standby: Mapping[str, TaskMap]) -> dict[str, dict[str, set[int]]]:
    """Kafka 4.4's StickyTaskAssignor.assignActive: its three passes."""
    quota = _Quota(sum(tasks.values()), len(members))
    given: dict[str, list[tuple[str, int]]] = {m: [] for m in members}
    # stickiness first, the tasks taken partition by partition across the subtopologies, so
    # that a member keeping its share keeps some of every subtopology, not the first ones
    free = sorted(((s, p) for s in tasks for p in range(tasks[s])), key=lambda t: (t[1], t[0]))
    before = {(s, p): m for m, (_, owned) in sorted(members.items())
              for s, ps in owned.items() for p in ps}
    for task in list(free):
        m = before.get(task)
        if m is not None and len(given[m]) < quota.per_member:
            quota.give(given[m], task, free)
    # then a task to the least loaded of its previous standby owners with room
    for task in list(free):
        had = [m for m in sorted(members) if task[1] in previous_standby.get(m, {}).get(
            task[0], ())]
        if had:
            m = min(had, key=lambda m: len(given[m]))
            if len(given[m]) < quota.per_member:
                quota.give(given[m], task, free)
    # the rest, subtopology by subtopology, to the least loaded process's least loaded member
    processes: dict[str, list[str]] = {}
    for m in sorted(members):
        processes.setdefault(members[m][0], []).append(m)
    for task in sorted(free):
        process = min(processes, key=lambda pid: (
            sum(len(given[m]) for m in processes[pid]) / len(processes[pid]), pid))
        m = min(processes[process], key=lambda m: (len(given[m]), m))
        given[m].append(task)
    return {m: _by_subtopology(owned) for m, owned in given.items()}


class _Quota:
    """The most active tasks a member keeps in the sticky passes: the tasks left over the
    members left, rounded up, counted again each time a member reaches it (Kafka's
    maybeUpdateActiveTasksPerMember)."""

    def __init__(self, tasks: int, members: int) -> None:
        self.tasks, self.members = tasks, members
        self.per_member = math.ceil(tasks / members) if members else 0

    def give(self, owned: list[tuple[str, int]], task: tuple[str, int],
             free: list[tuple[str, int]]) -> None:
        owned.append(task)
        free.remove(task)
        if len(owned) == self.per_member:
            self.tasks -= len(owned)
            self.members -= 1
            self.per_member = math.ceil(self.tasks / self.members) if self.members else 0


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
