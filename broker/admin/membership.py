"""A short-lived member of a classic consumer group, for `samsa consume --group`: JoinGroup,
SyncGroup (the range assignment computed here when this member leads, as Kafka's
RangeAssignor does), then LeaveGroup when done; the offsets are committed with the member's
generation. While it reads it sends a Heartbeat every heartbeat.interval.ms (default 3000),
so a read longer than session.timeout.ms (default 45000; both -X properties) keeps its place;
a heartbeat answered REBALANCE_IN_PROGRESS tells the reader to commit and join again.

The subscription and assignment are ConsumerProtocolSubscription / ConsumerProtocolAssignment
v0: version, [topic], user data (and [topic, [partition]] for the assignment)."""

from __future__ import annotations

import struct
import time
from collections import defaultdict
from typing import Any

from samsa.protocol.errors import ErrorCode

from . import groups
from .client import Admin, Connection, KafkaRequestError, check, retrying

JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 11, 12, 13, 14
SESSION_TIMEOUT_MS = 45_000  # the Java consumer's session.timeout.ms
HEARTBEAT_INTERVAL_MS = 3_000  # and heartbeat.interval.ms
PROTOCOL = "range"
REJOINS = 5


def _string(s: str) -> bytes:
    data = s.encode()
    return struct.pack(">h", len(data)) + data


def subscription(topics: list[str]) -> bytes:
    return (struct.pack(">hi", 0, len(topics)) + b"".join(_string(t) for t in topics)
            + struct.pack(">i", -1))


def subscribed_topics(data: bytes) -> list[str]:
    (count,) = struct.unpack_from(">i", data, 2)
    out, pos = [], 6
    for _ in range(count):
        (n,) = struct.unpack_from(">h", data, pos)
        out.append(data[pos + 2 : pos + 2 + n].decode())
        pos += 2 + n
    return out


def assignment(partitions: dict[str, list[int]]) -> bytes:
    out = struct.pack(">hi", 0, len(partitions))
    for topic, ps in sorted(partitions.items()):
        out += _string(topic) + struct.pack(f">i{len(ps)}i", len(ps), *ps)
    return out + struct.pack(">i", -1)


def range_assign(members: dict[str, list[str]], partition_counts: dict[str, int]
                 ) -> dict[str, dict[str, list[int]]]:
    """Kafka's RangeAssignor: per topic, its members in id order each take a run of
    partitions, the first (count % members) one more."""
    out: dict[str, dict[str, list[int]]] = {m: {} for m in members}
    by_topic: dict[str, list[str]] = defaultdict(list)
    for member, topics in sorted(members.items()):
        for t in topics:
            by_topic[t].append(member)
    for topic, subscribers in by_topic.items():
        runs = _runs(partition_counts.get(topic, 0), len(subscribers))
        out.update((m, {**out[m], topic: list(r)}) for m, r in zip(subscribers, runs,
                                                                     strict=True) if r)
    return out


def _runs(count: int, members: int) -> list[range]:
    """`count` partitions cut into `members` consecutive runs, the longer ones first."""
    share, extra = divmod(count, members)
    return [range(i * share + min(i, extra), (i + 1) * share + min(i + 1, extra))
            for i in range(members)]


class Member:
    """This process in `group`, subscribed to `topic`: its generation, id and partitions."""

    def __init__(self, admin: Admin, group: str, topic: str) -> None:
        self.admin, self.group, self.topic = admin, group, topic
        self.member_id, self.generation = "", -1
        self.partitions: list[int] = []
        props = admin.settings.props
        self.session_ms = int(props.get("session.timeout.ms", SESSION_TIMEOUT_MS))
        self.interval = int(props.get("heartbeat.interval.ms", HEARTBEAT_INTERVAL_MS)) / 1000
        self.last_heartbeat = time.monotonic()

    def _coordinator(self) -> Connection:
        return self.admin.coordinator(self.group)

    def join(self) -> list[int]:
        """Join (again while the group rebalances, as other members come and go) and
        return this member's partitions of the topic."""
        for attempt in range(REJOINS):
            try:
                data = self._join_and_sync()
                break
            except KafkaRequestError as e:
                if e.code != ErrorCode.rebalance_in_progress or attempt == REJOINS - 1:
                    raise
        mine = {a["topic"]: a["partitions"] for a in groups.consumer_assignment(data)}
        self.partitions = mine.get(self.topic, [])
        self.last_heartbeat = time.monotonic()
        return self.partitions

    def heartbeat(self) -> bool:
        """A Heartbeat when heartbeat.interval.ms has passed since the last; False when the
        group rebalances (the member must commit and join again)."""
        if time.monotonic() - self.last_heartbeat < self.interval:
            return True
        resp = self._coordinator().call(HEARTBEAT, {
            "group_id": self.group, "generation_id": self.generation,
            "member_id": self.member_id, "group_instance_id": None})
        self.last_heartbeat = time.monotonic()
        if resp.error_code == ErrorCode.rebalance_in_progress:
            return False
        check(resp.error_code)
        return True

    def _join_and_sync(self) -> bytes:
        joined = retrying(self.admin.settings, self._join)
        return retrying(self.admin.settings, lambda: self._sync(joined))

    def _join(self) -> Any:
        body = {"group_id": self.group, "session_timeout": self.session_ms,
                "rebalance_timeout": self.session_ms, "member_id": self.member_id,
                "group_instance_id": None, "protocol_type": "consumer",
                "protocols": [{"name": PROTOCOL, "metadata": subscription([self.topic])}],
                "reason": "samsa consume"}
        resp = self._coordinator().call(JOIN_GROUP, body)
        if resp.error_code == ErrorCode.member_id_required:  # KIP-394: again, with the id
            self.member_id = resp.member_id
            resp = self._coordinator().call(JOIN_GROUP, {**body, "member_id": self.member_id})
        check(resp.error_code)
        self.member_id, self.generation = resp.member_id, int(resp.generation_id)
        return resp

    def _sync(self, joined: Any) -> bytes:
        assignments = []
        if joined.leader == self.member_id:
            members = {m.member_id: subscribed_topics(m.metadata) for m in joined.members}
            topics = sorted({t for ts in members.values() for t in ts})
            counts = {t.name: len(t.partitions) for t in self.admin.metadata(topics).topics}
            assignments = [{"member_id": m, "assignment": assignment(a)}
                           for m, a in range_assign(members, counts).items()]
        resp = self._coordinator().call(SYNC_GROUP, {
            "group_id": self.group, "generation_id": self.generation,
            "member_id": self.member_id, "group_instance_id": None,
            "protocol_type": "consumer", "protocol_name": PROTOCOL,
            "assignments": assignments})
        check(resp.error_code)
        return bytes(resp.assignment)

    def leave(self) -> None:
        try:
            self._coordinator().call(LEAVE_GROUP, {
                "group_id": self.group, "member_id": self.member_id,
                "members": [{"member_id": self.member_id, "group_instance_id": None,
                             "reason": "samsa consume is done"}]})
        except KafkaRequestError:
            pass  # the session times out anyway
