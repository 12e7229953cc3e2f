"""Replication throttles (Kafka's ReplicationQuotaManager), used while partitions move.

A topic lists the replicas to throttle in `leader.replication.throttled.replicas` and
`follower.replication.throttled.replicas` ("*", or "partition:broker" entries, as
kafka-reassign-partitions --throttle writes them: the moving partitions' current replicas on
the leader side, the replicas being added on the follower side). A broker throttles a replica
its topic lists with its own id, and only while the fetching follower is out of the ISR:
as leader it answers such a follower's fetch with no records once the bytes it sent to
throttled followers exceed `leader.replication.throttled.rate` per second; as follower it
leaves such partitions out of its fetches once it fetched more than
`follower.replication.throttled.rate` per second for them. The rate is measured as Kafka's
Rate does: over `replication.quota.window.num` samples of
`replication.quota.window.size.seconds`, the elapsed time counted as at least all but one
sample's span.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import Any

LEADER = "leader.replication.throttled.replicas"
FOLLOWER = "follower.replication.throttled.replicas"
UNBOUNDED = 2**63 - 1


class ReplicationQuota:
    def __init__(
        self, broker_id: int, topic_config: Callable[[str], dict[str, Any] | None], key: str,
        bound: float, num_windows: int, window_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.broker_id = broker_id
        self._topic_config = topic_config  # topic name -> its config overrides (None: gone)
        self.key = key
        self.bound = bound
        self._num = num_windows
        self._window_s = window_s
        self._clock = clock
        self._samples: deque[list[float]] = deque()  # [start, bytes]
        self._parsed: dict[str, tuple[str, frozenset[int] | None]] = {}

    @property
    def active(self) -> bool:
        return self.bound < UNBOUNDED

    def is_throttled(self, topic: str, partition: int) -> bool:
        """Whether the topic lists (partition, this broker) on this side ("*": all)."""
        if not self.active:
            return False
        configs = self._topic_config(topic)
        value = str((configs or {}).get(self.key) or "")
        cached = self._parsed.get(topic)
        if cached is None or cached[0] != value:
            cached = (value, _parse(value, self.broker_id))
            self._parsed[topic] = cached
        partitions = cached[1]
        return partitions is None or partition in partitions

    def record(self, n: int) -> None:
        if n <= 0:
            return
        now = self._clock()
        if not self._samples or now - self._samples[-1][0] >= self._window_s:
            self._samples.append([now, 0.0])
        self._samples[-1][1] += n
        self._purge(now)

    def rate(self) -> float:
        now = self._clock()
        self._purge(now)
        if not self._samples:
            return 0.0
        total = sum(b for _, b in self._samples)
        elapsed = max(now - self._samples[0][0], (self._num - 1) * self._window_s,
                      self._window_s)
        return total / elapsed

    def exceeded(self) -> bool:
        return self.active and self.rate() > self.bound

    def _purge(self, now: float) -> None:
        horizon = self._num * self._window_s
        while self._samples and now - self._samples[0][0] > horizon:
            self._samples.popleft()


def _parse(value: str, broker_id: int) -> frozenset[int] | None:
    """The partitions of `value` throttled on `broker_id`; None for all ("*")."""
    entries = [e.strip() for e in value.split(",") if e.strip()]
    if "*" in entries:
        return None
    out = set()
    for entry in entries:
        partition, _, broker = entry.partition(":")
        if partition.isdigit() and broker.isdigit() and int(broker) == broker_id:
            out.add(int(partition))
    return frozenset(out)
