"""Specs of coordinator/runtime.py: the one append-error answer of the three coordinators, and
the staged changes undone when their records do not replicate."""

from __future__ import annotations

import pytest

from samsa.coordinator.internal_log import InternalAppendError
from samsa.coordinator.runtime import StagedWrites, append_answer
from samsa.protocol.errors import ErrorCode
from samsa.storage.errors import KafkaStorageError


@pytest.mark.parametrize(("error", "answer"), [
    (ErrorCode.not_leader_or_follower, ErrorCode.not_coordinator),
    (ErrorCode.kafka_storage_error, ErrorCode.not_coordinator),
    (ErrorCode.not_enough_replicas, ErrorCode.coordinator_not_available),
    (ErrorCode.not_enough_replicas_after_append, ErrorCode.coordinator_not_available),
    (ErrorCode.request_timed_out, ErrorCode.coordinator_not_available),
    (ErrorCode.unknown_topic_or_partition, ErrorCode.coordinator_not_available),
    (ErrorCode.message_too_large, ErrorCode.unknown_server_error),
])
def test_an_append_error_is_answered_as_kafka_does(error: ErrorCode, answer: ErrorCode) -> None:
    assert append_answer(InternalAppendError(error)) == answer


def test_errors_without_a_kafka_code_are_unknown_server_errors() -> None:
    assert append_answer(RuntimeError("boom")) == ErrorCode.unknown_server_error
    # a log directory that failed under the partition: another broker will lead it
    assert append_answer(KafkaStorageError("disk gone")) == ErrorCode.not_coordinator


class State:
    """A value changed by staged writes, each undone by putting the value back."""

    def __init__(self) -> None:
        self.value = 0
        self.staged: StagedWrites[str] = StagedWrites()

    def change(self, to: int, key: str = "g") -> object:
        before = self.value

        def undo() -> None:
            self.value = before
        self.value = to
        return self.staged.stage(key, undo)


def test_a_replicated_change_stays() -> None:
    s = State()
    token = s.change(1)
    s.staged.settle("g", token, replicated=True)
    assert (s.value, len(s.staged)) == (1, 0)


def test_a_failed_change_is_undone() -> None:
    s = State()
    token = s.change(1)
    s.staged.settle("g", token, replicated=False)
    assert (s.value, len(s.staged)) == (0, 0)


def test_a_failed_change_undoes_the_later_ones_built_on_it() -> None:
    s = State()
    first, second = s.change(1), s.change(2)
    s.staged.settle("g", first, replicated=False)
    assert s.value == 0
    s.staged.settle("g", second, replicated=False)  # already undone: nothing more to do
    assert (s.value, len(s.staged)) == (0, 0)


def test_a_later_failure_keeps_the_earlier_change() -> None:
    s = State()
    first, second = s.change(1), s.change(2)
    s.staged.settle("g", second, replicated=False)
    assert s.value == 1
    s.staged.settle("g", first, replicated=True)
    assert (s.value, len(s.staged)) == (1, 0)


def test_an_earlier_failure_after_a_later_success_undoes_both() -> None:
    s = State()
    first, second = s.change(1), s.change(2)
    s.staged.settle("g", second, replicated=True)
    s.staged.settle("g", first, replicated=False)
    assert s.value == 0


def test_changes_of_other_keys_are_left_alone() -> None:
    s = State()
    mine = s.change(1, "g")
    s.change(5, "h")  # another group's change, waiting
    s.staged.settle("g", mine, replicated=False)
    assert len(s.staged) == 1


def test_forgotten_changes_are_not_undone() -> None:
    s = State()
    token = s.change(1, "g")
    s.staged.forget(lambda key: key != "g")  # the group was unloaded
    s.staged.settle("g", token, replicated=False)
    assert (s.value, len(s.staged)) == (1, 0)
