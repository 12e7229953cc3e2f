"""The coordinators need nothing of a broker but the interfaces of coordinator/ports.py: an
`InternalTopic` and a `TransactionCoordinator` run here on a fake host (real partitions on
real logs, no replica manager, no metadata store), a fake marker sender and fake metrics."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from samsa.broker.replication.partition import Partition
from samsa.config.schema import BrokerConfig
from samsa.coordinator.internal_log import InternalAppendError, InternalTopic, ReplayedRecord
from samsa.coordinator.ports import (
    CoordinatorReplica,
    InternalLogHost,
    ProducerIdSource,
    TxnMarker,
    TxnMarkerSender,
    TxnMetrics,
)
from samsa.coordinator.producer_ids import ProducerIdNotAvailable
from samsa.coordinator.transaction import TransactionCoordinator, TxnState
from samsa.coordinator.transaction import coordinator as txn_coordinator
from samsa.protocol.errors import ErrorCode, KafkaError
from samsa.storage.config import LogConfig
from samsa.storage.log import Log

BROKER_ID = 1


class FakeHost:
    """One broker leading every partition of the topics it creates (one replica each)."""

    def __init__(self, root: Path, *, created_elsewhere: bool = False) -> None:
        self.root = root
        self.created_elsewhere = created_elsewhere  # another broker wins every creation
        self.created: list[tuple[str, int, int, dict[str, str]]] = []
        self._topics: dict[str, int] = {}
        self._partitions: dict[tuple[str, int], Partition] = {}

    def topic_partitions(self, topic: str) -> range | None:
        n = self._topics.get(topic)
        return None if n is None else range(n)

    def broker_count(self) -> int:
        return 1

    async def create_topic(
        self, name: str, partitions: int, replication_factor: int, configs: dict[str, str]
    ) -> None:
        self.created.append((name, partitions, replication_factor, dict(configs)))
        self._topics[name] = partitions
        for p in range(partitions):
            log = Log.open(self.root / f"{name}-{p}", LogConfig(), recover=False)
            self._partitions[(name, p)] = Partition(
                name, p, uuid.uuid4(), log, 0, [BROKER_ID], BROKER_ID
            )
        if self.created_elsewhere:
            raise KafkaError(f"Topic '{name}' already exists.", ErrorCode.topic_already_exists)

    def replica(self, topic: str, partition: int) -> CoordinatorReplica | None:
        return self._partitions.get((topic, partition))

    def leader(self, topic: str, partition: int) -> Partition:
        hosted = self._partitions.get((topic, partition))
        if hosted is None:
            raise KafkaError(topic, ErrorCode.unknown_topic_or_partition)
        if not hosted.is_leader:
            raise KafkaError(topic, ErrorCode.not_leader_or_follower)
        return hosted

    def close(self) -> None:
        for partition in self._partitions.values():
            partition.log.close()


class FakeMarkers:
    def __init__(self) -> None:
        self.sent: list[tuple[int, int, bool, int, list[tuple[str, int]]]] = []

    async def write_markers(self, marker: TxnMarker,
                            partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        tps = list(partitions)
        m = marker
        self.sent.append((m.producer_id, m.producer_epoch, m.commit, m.coordinator_epoch, tps))
        return dict.fromkeys(tps, ErrorCode.none)


class FakeMetrics:
    def __init__(self) -> None:
        self.completed: list[bool] = []
        self.timed_out: list[bool] = []

    def transaction_completed(self, committed: bool, markers_started_ms: int) -> None:
        self.completed.append(committed)

    def transaction_timed_out(self, abort_started: bool) -> None:
        self.timed_out.append(abort_started)


class FakeProducerIds:
    def __init__(self, first: int = 1000) -> None:
        self.next = first
        self.exhausted = False

    def next_id(self) -> int:
        if self.exhausted:
            raise ProducerIdNotAvailable("the next block is being claimed")
        self.next += 1
        return self.next - 1


@pytest.fixture
def host(tmp_path: Path) -> Iterator[FakeHost]:
    h = FakeHost(tmp_path)
    yield h
    h.close()


def internal_topic(host: InternalLogHost, min_isr: int | None = 2) -> InternalTopic:
    return InternalTopic(host, "__transaction_state", 1, 3, 1 << 20, min_isr=min_isr)


async def _start(topic: InternalTopic, coordinator: TransactionCoordinator) -> None:
    """Create the topic and start the coordinator; back once its partition is loaded (in the
    background)."""
    await topic.ensure_created()
    await coordinator.start()
    for _ in range(200):
        if coordinator.list_transactions(set(), set(), -1)[0] == ErrorCode.none:
            return
        await asyncio.sleep(0.01)


def test_the_fakes_are_the_interfaces(host: FakeHost) -> None:
    # What mypy checks statically, spelled out: each fake is passed as its interface.
    ports: tuple[InternalLogHost, TxnMarkerSender, TxnMetrics, ProducerIdSource] = (
        host, FakeMarkers(), FakeMetrics(), FakeProducerIds())
    assert len(ports) == 4


async def test_internal_topic_is_created_appended_and_replayed(host: FakeHost) -> None:
    topic = internal_topic(host)
    assert not topic.exists()
    await topic.ensure_created()
    await topic.ensure_created()  # exists: not created twice
    assert topic.exists() and list(topic.partitions()) == [0]
    [(name, partitions, factor, configs)] = host.created
    assert (name, partitions, factor) == ("__transaction_state", 1, 1)  # one broker
    assert configs["cleanup.policy"] == "compact"
    assert configs["min.insync.replicas"] == "1"  # capped at the replication factor
    assert topic.is_led_here(0) and topic.leader_epoch(0) == 0
    last = await topic.append_replicated(0, [(b"k1", b"v1"), (b"k2", None)])
    assert last == 1
    assert topic.append(0, [(b"k3", b"v3")]) == 2
    replayed = list(topic.replay(0))
    assert all(isinstance(r, ReplayedRecord) for r in replayed)
    assert [(r.offset, r.key, r.value) for r in replayed if isinstance(r, ReplayedRecord)] == [
        (0, b"k1", b"v1"), (1, b"k2", None), (2, b"k3", b"v3")]


async def test_a_topic_another_broker_created_first_is_fine(tmp_path: Path) -> None:
    host = FakeHost(tmp_path, created_elsewhere=True)
    try:
        await internal_topic(host).ensure_created()
        assert internal_topic(host).exists()
    finally:
        host.close()


async def test_appends_that_do_not_become_durable_carry_the_produce_error(
    host: FakeHost,
) -> None:
    topic = internal_topic(host)
    await topic.ensure_created()
    leader = host.leader(topic.name, 0)

    async def error_of(leader_epoch: int | None = None, timeout_s: float = 5.0) -> ErrorCode:
        with pytest.raises(KafkaError) as err:
            await topic.append_replicated(
                0, [(b"k", b"v")], leader_epoch=leader_epoch, timeout_s=timeout_s)
        return err.value.error_code

    leader.min_insync_replicas = 2
    assert await error_of() == ErrorCode.not_enough_replicas
    leader.min_insync_replicas = 1
    assert await error_of(leader_epoch=7) == ErrorCode.not_leader_or_follower
    leader.isr = [BROKER_ID, 2]  # a follower that never fetches: the HW stays put
    assert await error_of(timeout_s=0.05) == ErrorCode.request_timed_out
    leader.make_follower(2, 1, [2], [BROKER_ID, 2])
    assert await error_of() == ErrorCode.not_leader_or_follower  # the host's "not led here"
    assert not topic.is_led_here(0)
    with pytest.raises(KafkaError):
        topic.leader_epoch(0)
    assert issubclass(InternalAppendError, KafkaError)


async def test_a_transaction_commits_through_the_interfaces(host: FakeHost) -> None:
    topic = internal_topic(host)
    markers, metrics, pids = FakeMarkers(), FakeMetrics(), FakeProducerIds()
    coordinator = TransactionCoordinator(
        topic, BrokerConfig(), markers=markers, producer_ids=pids, metrics=metrics)
    missing = await coordinator.init_producer_id("t", 60_000, None)
    assert missing.error_code == ErrorCode.coordinator_not_available  # no topic yet
    await _start(topic, coordinator)
    try:
        pids.exhausted = True
        busy = await coordinator.init_producer_id("t", 60_000, None)
        assert busy.error_code == ErrorCode.coordinator_load_in_progress  # retriable
        pids.exhausted = False
        init = await coordinator.init_producer_id("t", 60_000, None)
        assert (init.error_code, init.producer_epoch) == (ErrorCode.none, 0)
        pid = init.producer_id
        assert pid >= 1000
        code = await coordinator.add_partitions("t", pid, 0, [("data", 0), ("data", 1)])
        assert code == ErrorCode.none
        assert (await coordinator.end_transaction("t", pid, 0, True)).error_code == ErrorCode.none
        for _ in range(200):
            if metrics.completed:
                break
            await asyncio.sleep(0.01)
        assert markers.sent == [(pid, 0, True, 0, [("data", 0), ("data", 1)])]
        assert metrics.completed == [True]
        code, md = coordinator.describe("t")
        assert code == ErrorCode.none and md is not None
        assert md.state is TxnState.COMPLETE_COMMIT
        assert [m.transactional_id for m in coordinator.loaded_transactions()] == ["t"]
        # The transaction's state records are in the topic, for the next coordinator.
        assert len(list(topic.replay(0))) == 4  # Empty, Ongoing, PrepareCommit, CompleteCommit
    finally:
        await coordinator.stop()


class GatedMarkers(FakeMarkers):
    """Markers written only once `gate` is set (another broker's partitions, slow)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()

    async def write_markers(self, marker: TxnMarker,
                            partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        await self.gate.wait()
        return await super().write_markers(marker, partitions)


async def test_an_add_right_after_a_commit_waits_for_its_markers(
        host: FakeHost, monkeypatch: pytest.MonkeyPatch) -> None:
    """The client's next transaction adds its partitions while the commit before still writes
    its markers: the add waits for them (at most CONCURRENT_WAIT_S) and is then handled,
    where it was answered CONCURRENT_TRANSACTIONS, which clients retry only after 20 ms; past
    the wait it is answered so as before."""
    topic = internal_topic(host)
    markers = GatedMarkers()
    coordinator = TransactionCoordinator(
        topic, BrokerConfig(), markers=markers, producer_ids=FakeProducerIds(),
        metrics=FakeMetrics())
    await _start(topic, coordinator)
    try:
        pid = (await coordinator.init_producer_id("t", 60_000, None)).producer_id
        assert await coordinator.add_partitions("t", pid, 0, [("data", 0)]) == ErrorCode.none
        assert (await coordinator.end_transaction("t", pid, 0, True)).error_code == ErrorCode.none

        monkeypatch.setattr(txn_coordinator, "CONCURRENT_WAIT_S", 30.0)
        add = asyncio.create_task(coordinator.add_partitions("t", pid, 0, [("data", 1)]))
        await asyncio.sleep(0.05)
        assert not add.done()  # waiting for the markers
        markers.gate.set()
        assert await asyncio.wait_for(add, 10) == ErrorCode.none
        code, md = coordinator.describe("t")
        assert md is not None and md.state is TxnState.ONGOING
        assert md.partitions == {("data", 1)}
        assert markers.sent == [(pid, 0, True, 0, [("data", 0)])]

        markers.gate.clear()
        assert (await coordinator.end_transaction("t", pid, 0, True)).error_code == ErrorCode.none
        monkeypatch.setattr(txn_coordinator, "CONCURRENT_WAIT_S", 0.01)
        late = await coordinator.add_partitions("t", pid, 0, [("data", 0)])
        assert late == ErrorCode.concurrent_transactions
        markers.gate.set()
    finally:
        await coordinator.stop()
