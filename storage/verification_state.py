"""KIP-890's verification state of one producer on one partition (Kafka's
VerificationStateEntry).

Before the first batch of a transaction is appended to a partition, its leader asks the
transaction coordinator whether the partition is in the producer's ongoing transaction. The
leader makes this state when it starts asking, and the append must present the same object:
if the transaction ended in between (its marker was written, which clears the state), the
append no longer matches and is refused, so a batch never opens a transaction its coordinator
does not know of (a hanging transaction). Its lowest sequence keeps a batch that was verified
from being overtaken by a later one of the same producer whose earlier batch failed to
verify (an OutOfOrderSequence loop otherwise).

Kept by `ProducerStateManager` in memory only (a leader's, for the time between the question and
the append); an entry never used expires with the producers (producer.id.expiration.ms).
"""

from __future__ import annotations


class VerificationState:
    """The state of one verification; the object itself is the guard an append presents."""

    __slots__ = ("timestamp", "lowest_sequence", "epoch", "supports_epoch_bump")

    def __init__(self, timestamp: int, sequence: int, epoch: int,
                 supports_epoch_bump: bool) -> None:
        self.timestamp = timestamp
        self.lowest_sequence = sequence
        self.epoch = epoch
        # transactions v2 (Produce v12+): every transaction starts its producer's sequences
        # at 0 under a new epoch
        self.supports_epoch_bump = supports_epoch_bump

    def note(self, sequence: int, epoch: int) -> None:
        """Another batch of the producer is being verified: keep the lowest sequence of this
        epoch; a newer epoch starts the sequences again (Kafka's
        maybeUpdateLowestSequenceAndEpoch)."""
        if epoch == self.epoch and sequence < self.lowest_sequence:
            self.lowest_sequence = sequence
        if epoch > self.epoch:
            self.epoch = epoch
            self.lowest_sequence = sequence

    def __repr__(self) -> str:
        return (f"VerificationState(epoch={self.epoch}, lowest_sequence={self.lowest_sequence}, "
                f"supports_epoch_bump={self.supports_epoch_bump})")


class Verifications:
    """The verification states of one partition's producers, by producer id (Kafka's
    ProducerStateManager.verificationStates): `ProducerStateManager.verifications`."""

    __slots__ = ("states",)

    def __init__(self) -> None:
        # read directly by the producer state's append paths (a membership test per batch)
        self.states: dict[int, VerificationState] = {}

    def start(self, producer_id: int, sequence: int, epoch: int, supports_epoch_bump: bool,
              now_ms: int) -> VerificationState:
        """The producer's state, made as its leader starts asking the coordinator about a
        batch (Kafka's maybeCreateVerificationStateEntry): the object the batch's append must
        present. An existing one is kept, noting the batch's sequence."""
        state = self.states.get(producer_id)
        if state is None:
            state = self.states[producer_id] = VerificationState(
                now_ms, sequence, epoch, supports_epoch_bump)
        else:
            state.note(sequence, epoch)
        return state

    def get(self, producer_id: int) -> VerificationState | None:
        return self.states.get(producer_id)

    def end(self, producer_id: int, marker_epoch: int | None) -> None:
        """A transactional batch of the producer (`marker_epoch` None) or its marker was
        written: the transaction is open here, or over, and its verification is done, except
        under transactions v2 when the marker has the epoch being verified (the next
        transaction's, which was bumped for it)."""
        state = self.states.get(producer_id)
        if state is None or (marker_epoch is not None and state.supports_epoch_bump
                             and marker_epoch == state.epoch):
            return
        del self.states[producer_id]

    def expire(self, now_ms: int, expiration_ms: int) -> None:
        """Drop the states of verifications whose batch never came."""
        for pid in [pid for pid, v in self.states.items()
                    if now_ms - v.timestamp >= expiration_ms]:
            del self.states[pid]


__all__ = ["VerificationState", "Verifications"]
