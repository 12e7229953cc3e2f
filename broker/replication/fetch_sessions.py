"""Incremental fetch sessions (KIP-227), as Kafka's FetchSession, FetchSessionCache and
FetchManager.

A fetcher opens a session with a full Fetch of session epoch 0: the answer carries a session id,
and the broker keeps the session's partitions with their fetch parameters. The fetcher's next
requests (epochs 1, 2, ...) name only the partitions it adds or whose parameters changed, and
those it forgets; each is read as the whole session, and answered with only the partitions that
have something new for the fetcher: records, a high watermark or log start offset it has not
been told, an error, a preferred read replica or a diverging epoch. So a consumer of many
partitions, most of them idle, sends and receives a few bytes a fetch instead of an entry per
partition. A full Fetch naming a session closes it; session epoch -1 fetches without one (the
answer's session id 0), as do versions before 7.

The cache holds `max.incremental.fetch.session.cache.slots` sessions. When it is full, a new
session may take the place of one unused for two minutes; else of the least valuable evictable
one (Kafka's tryEvict: a consumer's before a follower's, the smaller first), if the new one is
worth more; else it is not created and the fetcher goes on with full fetches.
"""

from __future__ import annotations

import itertools
import logging
import random
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from samsa.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0  # a full fetch that asks for a session
FINAL_EPOCH = -1  # a full fetch without one (closing the one named)
# Kafka's FetchSessionCache eviction time (not a setting there either): a session unused this
# long may be evicted by any new one, and a newer one is safe from eviction by a larger one.
EVICTION_MS = 120_000

# A session's partition: (the topic's id from v13 on, else its name; the partition index)
PartitionKey = tuple["uuid.UUID | str", int]
# A topic as the Fetch handler reads it: (its name, None if its id is unknown here; its id,
# None before v13; its partitions, a request's or a session's)
RequestedTopic = tuple["str | None", "uuid.UUID | None", Sequence[Any]]


def next_epoch(epoch: int) -> int:
    """The session epoch after `epoch` (Kafka's FetchMetadata.nextEpoch)."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == 2**31 - 1 else epoch + 1


@dataclass(slots=True)
class SessionPartition:
    """A partition of a session: the fetch parameters the fetcher last sent for it (named as a
    request's partition, which the Fetch handler reads either of) and what it was last told."""

    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    log_start_offset: int = -1  # the fetcher's (a follower's)
    told_high_watermark: int = -1  # -1: never told, or an error since (sent again)
    told_log_start_offset: int = -1

    @classmethod
    def of(cls, requested: Any) -> SessionPartition:
        """From a Fetch request's partition."""
        return cls(requested.partition, requested.fetch_offset, requested.partition_max_bytes,
                   getattr(requested, "current_leader_epoch", -1),
                   getattr(requested, "last_fetched_epoch", -1),
                   getattr(requested, "log_start_offset", -1))

    def update(self, requested: Any) -> None:
        """The fetcher sent new parameters (an incremental request names the partition)."""
        self.fetch_offset = requested.fetch_offset
        self.partition_max_bytes = requested.partition_max_bytes
        self.current_leader_epoch = getattr(requested, "current_leader_epoch", -1)
        self.last_fetched_epoch = getattr(requested, "last_fetched_epoch", -1)
        self.log_start_offset = getattr(requested, "log_start_offset", -1)

    def must_answer(self, answer: dict[str, Any]) -> bool:
        """Does the fetcher need this partition's answer (Kafka's maybeUpdateResponseData)?
        What it is told is remembered; an error forgets the high watermark, so that the
        partition is answered again once the error is gone."""
        must = bool(answer["records"]) or "diverging_epoch" in answer
        if answer.get("preferred_read_replica", -1) >= 0:
            must = True
        if answer["high_watermark"] != self.told_high_watermark:
            self.told_high_watermark = answer["high_watermark"]
            must = True
        if answer["log_start_offset"] != self.told_log_start_offset:
            self.told_log_start_offset = answer["log_start_offset"]
            must = True
        if answer["error_code"] != ErrorCode.none:
            self.told_high_watermark = -1
            must = True
        return must


@dataclass(slots=True, eq=False)
class FetchSession:
    id: int
    privileged: bool  # a follower's
    uses_topic_ids: bool  # opened with v13+ (and only used with v13+)
    created_ms: int
    last_used_ms: int
    epoch: int = 1  # the epoch its next request must carry
    # in the order the partitions are read: one answered records goes to the back, so that a
    # fetch's byte limit does not favour the same partitions every time (as Kafka's)
    partitions: dict[PartitionKey, SessionPartition] = field(default_factory=dict)
    # the session this one took the place of, until its first incremental request (a
    # throttled answer opens no session, and so evicts none: FetchSessionCache.unopen)
    displaced: FetchSession | None = None

    def topics(self, name_of: Callable[[uuid.UUID], str | None]) -> list[RequestedTopic]:
        """The session's partitions as a Fetch request's topics (each run of one topic's
        partitions in the session's order): (name, id, partitions). `name_of(id)` names a
        topic by its id (None: unknown here)."""
        out: list[RequestedTopic] = []
        for topic, group in itertools.groupby(self.partitions.items(), lambda kv: kv[0][0]):
            parts = [p for _, p in group]
            if isinstance(topic, uuid.UUID):
                out.append((name_of(topic), topic, parts))
            else:
                out.append((topic, None, parts))
        return out


@dataclass(slots=True)
class FetchContext:
    """What a Fetch request's session fields make of it (Kafka's FetchContext kinds):
    - `error` set: a session error, answered at once with no partitions;
    - `session` set: incremental, the session's partitions read and the answer pruned;
    - `opens`: a full fetch that asks for a session (created as it is answered);
    - otherwise a full fetch without one."""

    error: ErrorCode = ErrorCode.none
    session: FetchSession | None = None
    opens: bool = False
    privileged: bool = False
    uses_topic_ids: bool = False


class FetchSessionCache:
    """This broker's fetch sessions (one per fetcher that asked, up to `max_sessions`)."""

    def __init__(self, max_sessions: int, eviction_ms: int = EVICTION_MS,
                 clock: Callable[[], int] = lambda: int(time.monotonic() * 1000)) -> None:
        self.max_sessions = max_sessions
        self.eviction_ms = eviction_ms
        self._clock = clock  # milliseconds
        self.sessions: dict[int, FetchSession] = {}
        self.evictions = 0

    def __len__(self) -> int:
        return len(self.sessions)

    def partitions_cached(self) -> int:
        return sum(len(s.partitions) for s in self.sessions.values())

    # ---------------------------------------------------------------- a request's context
    def context(self, version: int, session_id: int, epoch: int, privileged: bool,
                requested: Iterable[tuple[uuid.UUID | str, Sequence[Any]]],
                forgotten: Iterable[tuple[uuid.UUID | str, Sequence[int]]]) -> FetchContext:
        """The context of a Fetch (Kafka's FetchManager.newContext): `requested` and
        `forgotten` are its topics (by id from v13, else by name) with their partitions (the
        request's partition entities; the forgotten partitions' indexes). An incremental
        request updates its session here, and moves the session to its next epoch."""
        uses_ids = version >= 13
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):  # a full fetch
            if self.sessions.pop(session_id, None) is not None:
                log.debug("fetch session %d closed by a full fetch", session_id)
            return FetchContext(opens=epoch == INITIAL_EPOCH and version >= 7,
                                privileged=privileged, uses_topic_ids=uses_ids)
        session = self.sessions.get(session_id)
        if session is None:
            return FetchContext(ErrorCode.fetch_session_id_not_found)
        if session.epoch != epoch:
            log.debug("fetch session %d: epoch %d, expected %d", session_id, epoch,
                      session.epoch)
            return FetchContext(ErrorCode.invalid_fetch_session_epoch)
        if session.uses_topic_ids != uses_ids:
            return FetchContext(ErrorCode.fetch_session_topic_id_error)
        partitions = session.partitions
        for topic, parts in requested:
            for p in parts:
                cached = partitions.get((topic, p.partition))
                if cached is None:
                    partitions[(topic, p.partition)] = SessionPartition.of(p)
                else:
                    cached.update(p)
        for topic, indexes in forgotten:
            for index in indexes:
                partitions.pop((topic, index), None)
        if not partitions:  # nothing left to fetch: the session ends, the fetch is full
            del self.sessions[session.id]
            return FetchContext(privileged=privileged, uses_topic_ids=uses_ids)
        session.last_used_ms = self._clock()
        session.epoch = next_epoch(epoch)
        session.displaced = None
        return FetchContext(session=session)

    # ------------------------------------------------------------------------ answering
    def open(self, context: FetchContext, partitions: Iterator[tuple[PartitionKey,
                                                                     SessionPartition]]) -> int:
        """A full fetch that asked for a session is answered: the new session's id, or
        INVALID_SESSION_ID when the cache has no room for it. `partitions` are its partitions,
        each told its answer already."""
        now = self._clock()
        cached = dict(partitions)
        displaced = None
        if len(self.sessions) >= self.max_sessions:
            displaced = self._evict_for(context.privileged, len(cached), now)
            if displaced is None:
                log.debug("no room for a fetch session of %d partitions", len(cached))
                return INVALID_SESSION_ID
        session = FetchSession(self._new_id(), context.privileged, context.uses_topic_ids,
                               now, now, next_epoch(INITIAL_EPOCH), cached, displaced)
        self.sessions[session.id] = session
        return session.id

    def unopen(self, session_id: int) -> None:
        """The answer that opened the session was not sent (a quota throttled it): as if it
        had not been opened, the session it evicted back in its place."""
        session = self.sessions.pop(session_id, None)
        displaced = session.displaced if session is not None else None
        if displaced is not None and displaced.id not in self.sessions:
            self.sessions[displaced.id] = displaced
            self.evictions -= 1

    def still_current(self, session: FetchSession, request_epoch: int) -> bool:
        """Is the session where this request left it (no other request used it meanwhile,
        Kafka's "possible duplicate request"), and still cached?"""
        return (self.sessions.get(session.id) is session
                and session.epoch == next_epoch(request_epoch))

    def _new_id(self) -> int:
        while True:
            candidate = random.randint(1, 2**31 - 1)
            if candidate not in self.sessions:
                return candidate

    def _evict_for(self, privileged: bool, size: int, now: int) -> FetchSession | None:
        """Kafka's FetchSessionCacheShard.tryEvict: the least recently used session if it
        has been unused for `eviction_ms`; else the least valuable (consumer's before a
        follower's, smaller first) of those it may evict, if worth less than the new one.
        A follower's session may evict any consumer's, and a follower's older than
        `eviction_ms`; a consumer's only sessions older than that. The evicted session, or
        None."""
        stale = min(self.sessions.values(), key=lambda s: s.last_used_ms, default=None)
        if stale is None:
            return None
        if now - stale.last_used_ms > self.eviction_ms:
            return self._evict(stale)
        old = now - self.eviction_ms
        candidates = [s for s in self.sessions.values() if s.created_ms < old
                      or (privileged and not s.privileged)]
        victim = min(candidates, key=lambda s: (s.privileged, len(s.partitions), s.id),
                     default=None)
        if victim is None or (privileged, size) <= (victim.privileged, len(victim.partitions)):
            return None
        return self._evict(victim)

    def _evict(self, session: FetchSession) -> FetchSession:
        del self.sessions[session.id]
        session.displaced = None  # (one displaced session kept at most)
        self.evictions += 1
        log.debug("fetch session %d evicted (%d partitions)", session.id,
                  len(session.partitions))
        return session
