"""A follower's side of an incremental fetch session (KIP-227), as Kafka's FetchSessionHandler.

The replica fetcher of one leader opens a session with a full Fetch (session epoch 0, every
followed partition). Each next fetch names only the partitions whose fetch parameters changed
(the ones that got records move their fetch offset) and those no longer followed from that
leader; the leader reads the whole session and answers only the partitions with something new.
So a follower of many partitions, most of them idle, sends and parses an entry for each partition
that moved, not for every partition, and the leader decodes and encodes as few.

What the leader holds is what was last sent: a request that gets no answer, an answer with a
session error, or one whose partitions do not match the request, starts over with a full fetch
(naming the old session, which closes it), as does a follower that threw away part of an
answer (`resend_all`): an incremental answer tells a partition's high watermark once.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

from samsa.protocol.errors import ErrorCode

from .fetch_sessions import INITIAL_EPOCH, INVALID_SESSION_ID, next_epoch

log = logging.getLogger(__name__)

# A followed partition, as a Fetch v13+ names it: (its topic's id, its index)
FollowedKey = tuple[uuid.UUID, int]


class FetchPosition(NamedTuple):
    """What a follower sends for one partition (compared whole: any change is sent). A tuple:
    one is made for every followed partition on every fetch."""

    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    log_start_offset: int
    partition_max_bytes: int


@dataclass(frozen=True, slots=True)
class SessionFetch:
    """One Fetch of the session: its id and epoch, the partitions to name and to forget."""

    session_id: int
    epoch: int
    to_send: dict[FollowedKey, FetchPosition]
    forgotten: list[FollowedKey]

    @property
    def full(self) -> bool:
        return self.epoch == INITIAL_EPOCH


class FollowerFetchSession:
    """The session of one replica fetcher with its leader."""

    def __init__(self, leader_id: int) -> None:
        self.leader_id = leader_id
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH  # of the next request; 0: a full one
        # the session's partitions as the leader holds them (what was last sent for each)
        self._sent: dict[FollowedKey, FetchPosition] = {}

    def build(self, wanted: dict[FollowedKey, FetchPosition]) -> SessionFetch:
        """The next Fetch for the partitions `wanted` (Kafka's FetchSessionHandler.Builder)."""
        sent, self._sent = self._sent, dict(wanted)
        if self.epoch == INITIAL_EPOCH:
            return SessionFetch(self.session_id, INITIAL_EPOCH, self._sent, [])
        forgotten = [key for key in sent if key not in wanted]
        changed = {key: position for key, position in wanted.items()
                   if sent.get(key) != position}
        return SessionFetch(self.session_id, self.epoch, changed, forgotten)

    def answered(self, fetch: SessionFetch, error: int, session_id: int,
                 partitions: Iterable[FollowedKey]) -> bool:
        """The leader answered `fetch` with the session error `error`, the session id
        `session_id` and answers for `partitions`: may the answers be applied (Kafka's
        handleResponse)? A full answer must answer every partition asked, an incremental
        one only partitions of the session."""
        if error != ErrorCode.none:
            log.info("fetch session %d with broker %d: %s; fetching in full", self.session_id,
                     self.leader_id, ErrorCode(error).name)
            if error == ErrorCode.fetch_session_id_not_found:
                self._start_over()
            else:
                self.resend_all()
            return False
        answered = set(partitions)
        if fetch.full:
            if answered != self._sent.keys():
                log.warning("broker %d answered a full fetch of %d partitions with %d others",
                            self.leader_id, len(self._sent), len(answered ^ self._sent.keys()))
                self._start_over()
                return False
            # no session (the leader's cache full, or it keeps none): full fetches again
            self.session_id = session_id
            self.epoch = next_epoch(INITIAL_EPOCH) if session_id != INVALID_SESSION_ID else 0
            return True
        if not answered <= self._sent.keys():
            log.warning("broker %d answered fetch session %d with partitions outside it",
                        self.leader_id, self.session_id)
            self.resend_all()
            return False
        if session_id == INVALID_SESSION_ID:  # the leader closed it
            self._start_over()
        else:
            self.epoch = next_epoch(self.epoch)
        return True

    def failed(self) -> None:
        """The fetch got no answer: the leader's session may or may not have moved on."""
        self.resend_all()

    def resend_all(self) -> None:
        """The next fetch is a full one, closing this session and opening another (Kafka's
        nextCloseExisting)."""
        self.epoch = INITIAL_EPOCH

    def _start_over(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
