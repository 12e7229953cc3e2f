"""Specs of coordinator/runtime.py: the one append-error answer of the three coordinators and
the load of a partition (on the fake host of test_coordinator_ports.py). What a coordinator
keeps of a change whose write fails: test_consumer_group_write_rollback.py."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from samsa.broker.replication.partition import Partition
from samsa.coordinator.internal_log import InternalAppendError, InternalTopic
from samsa.coordinator.runtime import (
    LOAD_YIELD_EVERY,
    Loaded,
    Loads,
    Tasks,
    WriteFailed,
    append_answer,
    begin_write,
    load,
    replay,
    write,
)
from samsa.protocol.errors import ErrorCode
from samsa.storage.errors import KafkaStorageError
from tests.unit.test_coordinator_ports import BROKER_ID, FakeHost


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


# ---- loading ---------------------------------------------------------------------------
@pytest.fixture
def host(tmp_path: Path) -> Iterator[FakeHost]:
    h = FakeHost(tmp_path)
    yield h
    h.close()


async def _topic(host: FakeHost, records: int = 0) -> InternalTopic:
    topic = InternalTopic(host, "__state", 1, 1, 1 << 20)
    await topic.ensure_created()
    if records:
        topic.append(0, [(b"k%d" % i, b"v") for i in range(records)])
    return topic


def _partition(host: FakeHost) -> Partition:
    part = host.replica("__state", 0)
    assert isinstance(part, Partition)
    return part


async def test_a_load_yields_to_the_loop_on_a_long_partition(host: FakeHost) -> None:
    topic = await _topic(host, 3 * LOAD_YIELD_EVERY)
    others = 0

    async def other() -> None:
        nonlocal others
        while True:
            others += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(other())
    await asyncio.sleep(0)
    seen = [e.offset async for e in replay(topic, 0)]
    task.cancel()
    assert seen == list(range(3 * LOAD_YIELD_EVERY))
    assert others >= 3  # the other task ran while the partition was replayed


async def test_a_failed_read_is_tried_again_until_it_succeeds(host: FakeHost) -> None:
    topic = await _topic(host)
    reads = 0

    async def read() -> str:
        nonlocal reads
        reads += 1
        if reads == 1:
            raise ValueError("unreadable")
        return "state"

    loaded = await load(topic, 0, read, stopping=lambda: False, serving="things")
    assert loaded is not None
    assert (loaded.state, loaded.attempts, loaded.epoch) == ("state", 2, 0)


async def test_a_read_that_ends_at_a_new_epoch_is_read_again(host: FakeHost) -> None:
    topic = await _topic(host)
    epochs = []

    async def read() -> int:
        part = _partition(host)
        epochs.append(part.leader_epoch)
        if len(epochs) == 1:  # led here again, at a new epoch, while reading
            part.make_leader(part.leader_epoch + 1, [BROKER_ID], [BROKER_ID])
        return len(epochs)

    loaded = await load(topic, 0, read, stopping=lambda: False, serving="things")
    assert loaded is not None
    assert (loaded.state, loaded.epoch, epochs) == (2, 1, [0, 1])


async def test_a_partition_led_elsewhere_is_not_loaded(host: FakeHost) -> None:
    topic = await _topic(host)

    async def read() -> int:
        part = _partition(host)
        part.make_follower(2, part.leader_epoch + 1, [BROKER_ID, 2], [BROKER_ID, 2])
        return 1

    assert await load(topic, 0, read, stopping=lambda: False, serving="things") is None
    assert await load(topic, 0, read, stopping=lambda: False, serving="things") is None
    assert await load(topic, 0, read, stopping=lambda: True, serving="things") is None


# ---- background tasks and periodic jobs ----------------------------------------------------
def _loads(topic: InternalTopic, gates: list[asyncio.Event],
           installed: list[tuple[int, str, bool]]) -> Loads[str]:
    """Loads whose n-th read waits for gates[n]; what is installed, and whether the partition
    was still loading then."""
    reads = 0

    async def read(p: int) -> str:
        nonlocal reads
        reads += 1
        await gates[reads - 1].wait()
        return f"read {reads} of {p}"

    def install(p: int, loaded: Loaded[str]) -> None:
        installed.append((p, loaded.state, p in loads))

    loads = Loads(topic, Tasks("test"), read, install, stopping=lambda: False,
                  serving="things")
    return loads


async def test_a_partition_is_loading_until_what_was_read_is_installed(host: FakeHost) -> None:
    topic = await _topic(host)
    gate, installed = asyncio.Event(), []
    loads = _loads(topic, [gate], installed)
    loads.start(0)
    loads.start(0)  # already loading: one load
    await asyncio.sleep(0.01)
    assert 0 in loads and len(loads) == 1 and installed == []
    gate.set()
    await asyncio.sleep(0.01)
    assert installed == [(0, "read 1 of 0", False)] and 0 not in loads


async def test_a_partition_moved_away_while_loading_installs_nothing(host: FakeHost) -> None:
    topic = await _topic(host)
    gates, installed = [asyncio.Event(), asyncio.Event()], []
    loads = _loads(topic, gates, installed)
    loads.start(0)
    await asyncio.sleep(0.01)
    loads.cancel(0)
    assert 0 not in loads
    loads.start(0)  # and back: a new load
    for gate in gates:
        gate.set()
    await asyncio.sleep(0.01)
    assert installed == [(0, "read 2 of 0", False)] and 0 not in loads


async def test_a_periodic_job_runs_on_after_a_failed_run(caplog: pytest.LogCaptureFixture) -> None:
    tasks = Tasks("test coordinator")
    runs: list[int] = []
    done = asyncio.Event()

    async def job() -> None:
        runs.append(len(runs))
        if len(runs) == 1:
            raise RuntimeError("first run fails")
        if len(runs) == 3:
            done.set()

    tasks.every(0.001, job, "a job")
    await asyncio.wait_for(done.wait(), 10)
    assert len(tasks) == 1
    await tasks.cancel_all()
    assert len(tasks) == 0
    assert "test coordinator: a job failed" in caplog.text


async def test_a_task_that_fails_is_logged_and_dropped(caplog: pytest.LogCaptureFixture) -> None:
    tasks = Tasks("test coordinator")

    async def boom() -> None:
        raise RuntimeError("boom")

    task = tasks.spawn(boom())
    await asyncio.gather(task, return_exceptions=True)
    await asyncio.sleep(0)
    assert len(tasks) == 0
    assert "test coordinator: task failed" in caplog.text


# ---- writes ---------------------------------------------------------------------------------
async def test_a_write_returns_once_replicated_at_the_loaded_epoch(host: FakeHost) -> None:
    topic = await _topic(host)
    assert await write(topic, 0, [(b"k", b"v")], leader_epoch=0, what="a record") == 0


@pytest.mark.parametrize(("breakage", "answer"), [
    ("new epoch", ErrorCode.not_coordinator),  # fenced: the partition was led anew
    ("isr too small", ErrorCode.coordinator_not_available),
    ("follower stalls", ErrorCode.coordinator_not_available),
])
async def test_a_write_that_is_not_replicated_is_answered_as_kafka_does(
        host: FakeHost, breakage: str, answer: ErrorCode) -> None:
    topic = await _topic(host)
    part = _partition(host)
    if breakage == "new epoch":
        part.make_leader(1, [BROKER_ID], [BROKER_ID])
    elif breakage == "isr too small":
        part.min_insync_replicas = 2
    else:
        part.isr = [BROKER_ID, 2]
    with pytest.raises(WriteFailed) as err:
        await write(topic, 0, [(b"k", b"v")], leader_epoch=0, what="a record", timeout_s=0.05)
    assert err.value.error_code == answer


async def test_a_write_appends_now_and_waits_for_the_isr_when_awaited(host: FakeHost) -> None:
    topic = await _topic(host)
    part = _partition(host)
    waiting = begin_write(topic, 0, [(b"k", b"v")], what="a record")
    assert part.log_end_offset == 1  # in the local log before anything is awaited
    assert await waiting == 0


async def test_a_coordinator_may_answer_other_errors_its_own_way(host: FakeHost) -> None:
    topic = await _topic(host)
    _partition(host).min_insync_replicas = 2

    def group_answer(exc: BaseException) -> ErrorCode:
        return ErrorCode.invalid_commit_offset_size

    with pytest.raises(WriteFailed) as err:
        begin_write(topic, 0, [(b"k", b"v")], what="a record", answer=group_answer)
    assert err.value.error_code == ErrorCode.invalid_commit_offset_size
    assert isinstance(err.value.cause, InternalAppendError)
