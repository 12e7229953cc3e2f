"""Metadata responses' topic entries, encoded once and reused until the metadata changes.

A full Metadata request at 10,000 partitions spent most of its time building and encoding
the same partition entries again. Each topic's entry is kept encoded per (request version,
listener): those are all the entry depends on besides the cluster metadata (the partitions'
leaders, epochs, replicas and ISR; which brokers are alive and have that listener, and
whether a leader's state predates its registration; which replicas are in failed log
directories). The entries are per topic, so a response is still assembled per request from
the topics its principal may describe: an ACL-filtered view is never a copy of someone
else's.

Invalidation: the metadata store tells its listeners of every change (`on_change`): a topic's
change drops that topic's entries (a leadership written again in its leader's current life
is one), any other change (brokers and their registrations, controller, failed log
directories elsewhere) drops them all, and so does a change of this broker's own offline
replicas (checked on every use: that set changes without a store event).
"""

from __future__ import annotations

from collections.abc import Callable

from samsa.protocol.encoder import Encoded

# (request version, listener name)
EntryKey = tuple[int, str]


class TopicMetadataCache:
    def __init__(self) -> None:
        self._entries: dict[str, dict[EntryKey, Encoded]] = {}
        self._offline: frozenset[tuple[str, int]] = frozenset()
        self.hits = 0
        self.misses = 0

    def on_change(self, kind: str, name: str) -> None:
        """Metadata store listener: (kind, name) changed."""
        if kind == "topic":
            self._entries.pop(name, None)
        else:
            self._entries.clear()

    def clear(self) -> None:
        self._entries.clear()

    def check_offline(self, offline: set[tuple[str, int]]) -> None:
        """Drop everything if this broker's offline replicas are not those the entries were
        made with."""
        if len(offline) != len(self._offline) or not self._offline.issuperset(offline):
            self._entries.clear()
            self._offline = frozenset(offline)

    def entry(self, topic: str, version: int, listener: str,
              make: Callable[[], Encoded]) -> Encoded:
        """The topic's encoded entry for this version and listener (`make` when there is
        none)."""
        per_topic = self._entries.get(topic)
        if per_topic is None:
            per_topic = self._entries[topic] = {}
        key = (version, listener)
        found = per_topic.get(key)
        if found is not None:
            self.hits += 1
            return found
        self.misses += 1
        made = per_topic[key] = make()
        return made

    def __len__(self) -> int:
        return sum(len(v) for v in self._entries.values())

