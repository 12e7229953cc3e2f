"""Per-transactional-id state (Kafka's TransactionMetadata), transitions as immutable copies.

A transition is prepared (`pending_state` set, nothing else changes), written to the log, and
only then applied with `complete_transition`; while a transition is pending, most requests for
the id are answered CONCURRENT_TRANSACTIONS.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from samsa.protocol.errors import ErrorCode

from .log import TxnLogValue

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 32767


def epoch_exhausted(epoch: int) -> bool:
    return epoch >= MAX_EPOCH - 1


class TxnState(enum.IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        return _NAMES[self]

    @classmethod
    def by_name(cls, name: str) -> TxnState | None:
        return _BY_NAME.get(name)


_NAMES = {
    TxnState.EMPTY: "Empty",
    TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit",
    TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit",
    TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead",
    TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {v: k for k, v in _NAMES.items()}

S = TxnState
VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    # TV2: an abort with no transaction open bumps the epoch through PrepareAbort.
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE, S.EMPTY, S.COMPLETE_COMMIT,
                                S.COMPLETE_ABORT}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}
COMPLETED = frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT})
PREPARED = frozenset({S.PREPARE_COMMIT, S.PREPARE_ABORT})


class IllegalTransition(Exception):
    pass


@dataclass(frozen=True, slots=True)
class TxnTransit:
    """The state a prepared transition moves to (also what is written to the log)."""

    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[tuple[str, int]]
    start_ms: int
    last_update_ms: int
    next_producer_id: int = NO_PRODUCER_ID
    client_transaction_version: int = 0

    def log_value(self) -> TxnLogValue:
        parts = () if self.state is S.EMPTY else tuple(sorted(self.partitions))
        return TxnLogValue(
            self.producer_id,
            self.producer_epoch,
            self.timeout_ms,
            int(self.state),
            parts,
            self.last_update_ms,
            self.start_ms,
            previous_producer_id=self.last_producer_id,
            next_producer_id=self.next_producer_id,
            client_transaction_version=self.client_transaction_version,
        )


@dataclass(slots=True)
class TxnMetadata:
    transactional_id: str
    producer_id: int
    last_producer_id: int = NO_PRODUCER_ID  # Kafka's previousProducerId (KIP-360 rotation)
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    timeout_ms: int = 60000
    state: TxnState = TxnState.EMPTY
    partitions: set[tuple[str, int]] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    pending_state: TxnState | None = None
    # TV2 (KIP-890 part 2): the producer id a completing transaction moves to when its epoch
    # is exhausted, and the transaction version of the client's last EndTxn/implicit add.
    next_producer_id: int = NO_PRODUCER_ID
    client_transaction_version: int = 0

    @property
    def tv2(self) -> bool:
        """Does this transaction bump the epoch at every EndTxn (Kafka's supportsEpochBump)?"""
        return self.client_transaction_version >= 2

    @property
    def pending(self) -> bool:
        return self.pending_state is not None

    def _transit(self, state: TxnState, **changes: object) -> TxnTransit:
        if self.pending_state is not None:
            raise IllegalTransition(
                f"{self.transactional_id}: transition to {state.name} while "
                f"{self.pending_state.name} is pending"
            )
        if self.state not in VALID_PREVIOUS[state]:
            raise IllegalTransition(f"{self.transactional_id}: {self.state.name} -> {state.name}")
        fields: dict[str, object] = {
            "producer_id": self.producer_id,
            "last_producer_id": self.last_producer_id,
            "producer_epoch": self.producer_epoch,
            "last_producer_epoch": self.last_producer_epoch,
            "timeout_ms": self.timeout_ms,
            "state": state,
            "start_ms": self.start_ms,
            "last_update_ms": self.last_update_ms,
            "next_producer_id": self.next_producer_id,
            "client_transaction_version": self.client_transaction_version,
        }
        fields.update(changes)
        if "partitions" not in fields:  # most transitions set it: no copy made for them
            fields["partitions"] = frozenset(self.partitions)
        self.pending_state = state
        # one construction (dataclasses.replace of a first one cost as much again, three
        # times a transaction)
        return TxnTransit(**fields)  # type: ignore[arg-type]

    # ---- transitions (Kafka's prepare* methods) ---------------------------------------------
    def prepare_increment_epoch(
        self, timeout_ms: int, expected_epoch: int | None, now: int
    ) -> TxnTransit | ErrorCode:
        """Bump the epoch (InitProducerId); returns PRODUCER_FENCED when the caller is fenced."""
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch  # retry of a success
        else:
            return ErrorCode.producer_fenced
        return self._transit(
            S.EMPTY,
            producer_epoch=epoch,
            last_producer_epoch=last,
            timeout_ms=timeout_ms,
            partitions=frozenset(),
            start_ms=-1,
            last_update_ms=now,
        )

    def prepare_producer_id_rotation(
        self, new_pid: int, timeout_ms: int, now: int, recovering: bool
    ) -> TxnTransit:
        return self._transit(
            S.EMPTY,
            producer_id=new_pid,
            last_producer_id=self.producer_id,
            producer_epoch=0,
            last_producer_epoch=self.producer_epoch if recovering else NO_PRODUCER_EPOCH,
            timeout_ms=timeout_ms,
            partitions=frozenset(),
            start_ms=-1,
            last_update_ms=now,
        )

    def prepare_add_partitions(
        self, added: set[tuple[str, int]], now: int, client_version: int = 0
    ) -> TxnTransit:
        start = now if self.state in COMPLETED else self.start_ms
        return self._transit(
            S.ONGOING,
            partitions=frozenset(self.partitions | added),
            start_ms=start,
            last_update_ms=now,
            client_transaction_version=client_version,
        )

    def prepare_abort_or_commit(
        self, state: TxnState, now: int, client_version: int = 0,
        next_producer_id: int = NO_PRODUCER_ID, bump: bool = False,
    ) -> TxnTransit:
        """PrepareCommit/PrepareAbort. TV2 (`bump`, not when fencing) bumps the epoch (markers
        carry the bumped one); `next_producer_id` is where an exhausted epoch moves on Complete. An
        abort with no transaction open (TV2 only) starts its empty transaction now."""
        changes: dict[str, object] = {
            "last_update_ms": now,
            "client_transaction_version": client_version,
            "next_producer_id": next_producer_id,
        }
        if bump:
            changes.update(producer_epoch=self.producer_epoch + 1,
                           last_producer_epoch=self.producer_epoch)
        if self.state in COMPLETED:
            changes.update(start_ms=now, partitions=frozenset())
        return self._transit(state, **changes)

    def prepare_complete(self, now: int) -> TxnTransit:
        state = S.COMPLETE_COMMIT if self.state is S.PREPARE_COMMIT else S.COMPLETE_ABORT
        changes: dict[str, object] = {}
        if self.tv2 and self.next_producer_id != NO_PRODUCER_ID:
            # The epoch was exhausted: the transaction's producer continues as a new id.
            changes.update(producer_id=self.next_producer_id, last_producer_id=self.producer_id,
                           producer_epoch=0)
        return self._transit(state, partitions=frozenset(), last_update_ms=now,
                             next_producer_id=NO_PRODUCER_ID, **changes)

    def prepare_dead(self) -> TxnTransit:
        return self._transit(S.DEAD)

    def prepare_fence_epoch(self) -> None:
        """Bump the epoch in memory to fence the current producer (PrepareEpochFence)."""
        if self.state is not S.ONGOING or self.pending_state is not None:
            raise IllegalTransition(f"{self.transactional_id}: cannot fence from {self.state.name}")
        if self.producer_epoch < MAX_EPOCH:
            self.producer_epoch += 1
        self.pending_state = S.PREPARE_EPOCH_FENCE

    # ---- applying -------------------------------------------------------------------------
    def complete_transition(self, t: TxnTransit) -> None:
        self.producer_id = t.producer_id
        self.last_producer_id = t.last_producer_id
        self.producer_epoch = t.producer_epoch
        self.last_producer_epoch = t.last_producer_epoch
        self.timeout_ms = t.timeout_ms
        self.state = t.state
        self.partitions = set(t.partitions)
        self.start_ms = t.start_ms
        self.last_update_ms = t.last_update_ms
        self.next_producer_id = t.next_producer_id
        self.client_transaction_version = t.client_transaction_version
        self.pending_state = None

    def abort_transition(self) -> None:
        self.pending_state = None

    @classmethod
    def from_log(cls, transactional_id: str, v: TxnLogValue) -> TxnMetadata:
        return cls(
            transactional_id,
            v.producer_id,
            last_producer_id=v.previous_producer_id,
            producer_epoch=v.producer_epoch,
            timeout_ms=v.timeout_ms,
            state=TxnState(v.status),
            partitions=set(v.partitions),
            start_ms=v.start_ms,
            last_update_ms=v.last_update_ms,
            next_producer_id=v.next_producer_id,
            client_transaction_version=v.client_transaction_version,
        )
