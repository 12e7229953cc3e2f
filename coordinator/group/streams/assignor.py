"""The streams group's task assignor for active tasks: Kafka's "sticky" (StickyTaskAssignor),
its active-task half. Every task goes to one member; a member keeps the tasks of its previous
target assignment while that keeps the load balanced (at most ceil(tasks / members) each),
and the rest go to the least loaded members, a process's members spread alike. Standby and
warm-up tasks are not assigned yet (group.streams.num.standby.replicas is 0 by default).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from .model import TaskMap, Tasks, task_map


def assign(members: Mapping[str, tuple[str, TaskMap]], tasks: Mapping[str, int]
           ) -> dict[str, Tasks]:
    """members: member id -> (process id, its previous target active tasks); tasks:
    subtopology id -> task count. Returns each member's new target assignment."""
    if not members:
        return {}
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
    out: dict[str, Tasks] = {}
    for m, owned in given.items():
        active: dict[str, set[int]] = {}
        for s, p in owned:
            active.setdefault(s, set()).add(p)
        out[m] = Tasks(active=task_map(active))
    return out
