"""A streams group's topology against the cluster's topics (Kafka's InternalTopicManager
.configureTopics): how many partitions each repartition and changelog topic needs, which
internal topics are missing (the broker creates them, as Kafka's does for streams groups), and
how many tasks each subtopology has. A topology whose source topics are missing or whose
topics are partitioned wrongly gets no tasks; its members hear why in the heartbeat's status.
"""

from __future__ import annotations

import enum
import hashlib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from .model import Subtopology, TopicInfo, Topology

# topic name -> partition count, None if the topic does not exist
PartitionCounts = Callable[[str], int | None]


class Status(enum.IntEnum):
    """StreamsGroupHeartbeatResponse's status codes."""

    STALE_TOPOLOGY = 0
    MISSING_SOURCE_TOPICS = 1
    INCORRECTLY_PARTITIONED_TOPICS = 2
    MISSING_INTERNAL_TOPICS = 3
    SHUTDOWN_APPLICATION = 4
    ASSIGNMENT_DELAYED = 5
    MISSING_CLIENT_TAGS = 6


@dataclass(frozen=True, slots=True)
class Configured:
    """A topology as the cluster's topics allow it: `tasks` (subtopology -> task count) when
    it can run, else the `status` and its detail; `to_create` the internal topics to make."""

    tasks: dict[str, int] = field(default_factory=dict)
    to_create: tuple[TopicInfo, ...] = ()
    status: Status | None = None
    detail: str = ""

    @property
    def ready(self) -> bool:
        return self.status is None


def resolve(topology: Topology, names: Iterable[str]) -> tuple[Topology, list[str]]:
    """The topology with each source regex replaced by the topics it matches (whole names, not
    internal ones: a Kafka pattern subscription), and the regexes that match none."""
    if not any(s.source_topic_regex for s in topology.subtopologies):
        return topology, []
    own = {t.name for s in topology.subtopologies
           for t in (*s.repartition_source_topics, *s.state_changelog_topics)}
    candidates = sorted(n for n in names if n not in own and not n.startswith("__"))
    unmatched: list[str] = []
    subtopologies = []
    for s in topology.subtopologies:
        found: list[str] = []
        for regex in s.source_topic_regex:
            pattern = re.compile(regex)
            matched = [n for n in candidates if pattern.fullmatch(n)]
            if not matched:
                unmatched.append(regex)
            found += [n for n in matched if n not in found and n not in s.source_topics]
        subtopologies.append(replace(s, source_topics=(*s.source_topics, *found),
                                     source_topic_regex=()))
    return replace(topology, subtopologies=tuple(subtopologies)), unmatched


def topics_of(topology: Topology) -> set[str]:
    """Every topic the topology reads or keeps (what the group's metadata hash covers)."""
    names: set[str] = set()
    for s in topology.subtopologies:
        names.update(s.source_topics)
        names.update(t.name for t in s.repartition_source_topics)
        names.update(t.name for t in s.state_changelog_topics)
    return names


def metadata_hash(topology: Topology, counts: PartitionCounts,
                  names: Iterable[str] = ()) -> int:
    """A hash of the partition counts of the topology's topics (its regexes resolved against
    `names`, every topic's name): a change means the topology is configured again and the
    group's tasks assigned again."""
    h = hashlib.sha256()
    for name in sorted(topics_of(resolve(topology, names)[0])):
        h.update(f"{name}\0{counts(name)}\0".encode())
    return int.from_bytes(h.digest()[:8], "big", signed=True)


def _repartition_counts(topology: Topology, counts: PartitionCounts) -> dict[str, int] | None:
    """The partition count of each repartition topic: as declared, else the largest source
    count of the subtopologies that write to it (repeated until all are known; Kafka's
    RepartitionTopics). None if one cannot be derived."""
    known = {t.name: t.partitions for s in topology.subtopologies
             for t in s.repartition_source_topics if t.partitions > 0}
    wanted = {t.name for s in topology.subtopologies for t in s.repartition_source_topics}
    while wanted - known.keys():
        progress = False
        for name in sorted(wanted - known.keys()):
            writers = [s for s in topology.subtopologies if name in s.repartition_sink_topics]
            inputs = [_count(s, counts, known) for s in writers]
            if writers and all(n is not None for n in inputs):
                known[name] = max(n for n in inputs if n is not None)
                progress = True
        if not progress:
            return None
    return known


def _count(s: Subtopology, counts: PartitionCounts, repartition: dict[str, int]) -> int | None:
    """The number of tasks of subtopology s: its largest input topic."""
    found: list[int] = []
    for name in s.source_topics:
        n = counts(name)
        if n is None:
            return None
        found.append(n)
    for t in s.repartition_source_topics:
        if t.name not in repartition:
            return None
        found.append(repartition[t.name])
    return max(found) if found else None


def _copartition(topology: Topology, counts: PartitionCounts,
                 repartition: dict[str, int]) -> str | None:
    """Kafka's CopartitionedTopicsEnforcer: the source topics of a copartition group must have
    one partition count; its repartition topics get that count. Returns the topics in error."""
    for s in topology.subtopologies:
        for sources, _regex, parts in s.copartition_groups:
            external = {s.source_topics[i]: counts(s.source_topics[i]) or 0 for i in sources
                        if i < len(s.source_topics)}
            if len(set(external.values())) > 1:
                return ", ".join(sorted(external))
            names = [s.repartition_source_topics[i] for i in parts
                     if i < len(s.repartition_source_topics)]
            if external:
                n = next(iter(external.values()))
            else:
                n = max((repartition.get(t.name, 0) for t in names), default=0)
            for t in names:
                if t.partitions > 0 and t.partitions != n:
                    return t.name
                repartition[t.name] = n
    return None


def configure(topology: Topology, counts: PartitionCounts,
              names: Iterable[str] = ()) -> Configured:
    """The topology against the topics that exist now, `names` (see the module's
    docstring)."""
    topology, unmatched = resolve(topology, names)
    missing = sorted({n for s in topology.subtopologies for n in s.source_topics
                      if counts(n) is None})
    if missing:
        return Configured(status=Status.MISSING_SOURCE_TOPICS,
                          detail="Source topics " + ", ".join(missing) + " are missing.")
    if unmatched:
        return Configured(status=Status.MISSING_SOURCE_TOPICS,
                          detail="Regular expressions " + ", ".join(unmatched)
                          + " cannot be resolved.")
    repartition = _repartition_counts(topology, counts)
    if repartition is None:
        return Configured(status=Status.INCORRECTLY_PARTITIONED_TOPICS,
                          detail="The partition count of a repartition topic cannot be derived.")
    wrong = _copartition(topology, counts, repartition)
    if wrong is not None:
        return Configured(status=Status.INCORRECTLY_PARTITIONED_TOPICS,
                          detail=f"Following topics are not copartitioned: {wrong}")
    tasks = {s.subtopology_id: _count(s, counts, repartition) or 0
             for s in topology.subtopologies}
    wanted: list[TopicInfo] = []
    for s in topology.subtopologies:
        wanted += [TopicInfo(t.name, repartition[t.name], t.replication_factor, t.configs)
                   for t in s.repartition_source_topics]
        wanted += [TopicInfo(t.name, tasks[s.subtopology_id], t.replication_factor, t.configs)
                   for t in s.state_changelog_topics]
    return _against_existing(tasks, wanted, counts)


def _against_existing(tasks: dict[str, int], wanted: list[TopicInfo],
                      counts: PartitionCounts) -> Configured:
    wrong = sorted({t.name for t in wanted
                    if counts(t.name) is not None and counts(t.name) != t.partitions})
    if wrong:
        return Configured(status=Status.INCORRECTLY_PARTITIONED_TOPICS,
                          detail="Following topics have the wrong number of partitions: "
                          + ", ".join(wrong))
    unique = {t.name: t for t in wanted if counts(t.name) is None}
    if unique:
        return Configured(to_create=tuple(unique.values()),
                          status=Status.MISSING_INTERNAL_TOPICS,
                          detail="Internal topics are missing: " + ", ".join(sorted(unique)))
    return Configured(tasks=tasks)
