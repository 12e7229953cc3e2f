"""The transaction coordinator while a `__transaction_state` partition's leadership changes.
When its leader epoch changes during the load while this broker keeps leading it (the replica
manager tells the coordinator again, is_leader=True), the load read at the old epoch is
dropped, and the partition must be loaded again, not served with no state at all (its
transactional ids then unknown: producers not fenced, prepared transactions never finished).
A request that waited while the partition moved away is answered as the broker stands now."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from samsa.broker.replication.partition import Partition
from samsa.config.schema import BrokerConfig
from samsa.coordinator.transaction import TransactionCoordinator
from samsa.coordinator.transaction import coordinator as txn_coordinator
from samsa.protocol.errors import ErrorCode
from tests.unit.test_coordinator_ports import (
    BROKER_ID,
    FakeHost,
    FakeMarkers,
    FakeMetrics,
    FakeProducerIds,
    GatedMarkers,
    internal_topic,
)

IDS = 1200  # enough state records that the load yields to the loop on its way


@pytest.fixture
def host(tmp_path: Path) -> Iterator[FakeHost]:
    h = FakeHost(tmp_path)
    yield h
    h.close()


async def _settle(coordinator: TransactionCoordinator) -> None:
    for _ in range(500):
        if coordinator.list_transactions(set(), set(), -1)[0] == ErrorCode.none:
            return
        await asyncio.sleep(0.01)


async def test_a_leader_epoch_bump_during_the_load_loads_again(host: FakeHost) -> None:
    topic = internal_topic(host, min_isr=None)
    coordinator = TransactionCoordinator(topic, BrokerConfig(), markers=FakeMarkers(),
                                         producer_ids=FakeProducerIds(), metrics=FakeMetrics())
    await topic.ensure_created()
    await coordinator.start()
    try:
        await _settle(coordinator)
        for i in range(IDS):
            assert (await coordinator.init_producer_id(f"t{i}", 60_000, None)).error_code \
                == ErrorCode.none
        part = host.replica("__transaction_state", 0)
        assert isinstance(part, Partition)
        # Moved away and back, as the replica manager does it.
        part.make_follower(2, part.leader_epoch + 1, [BROKER_ID, 2], [BROKER_ID, 2])
        coordinator.on_leadership(0, False)
        part.make_leader(part.leader_epoch + 1, [BROKER_ID], [BROKER_ID])
        coordinator.on_leadership(0, True)
        await asyncio.sleep(0)  # the load is under way (it yields every 500 records)
        assert coordinator.describe("t0")[0] == ErrorCode.coordinator_load_in_progress
        # A new leader epoch, still led here, while the load is under way.
        part.make_leader(part.leader_epoch + 1, [BROKER_ID], [BROKER_ID])
        coordinator.on_leadership(0, True)
        await _settle(coordinator)
        code, md = coordinator.describe(f"t{IDS - 1}")
        assert code == ErrorCode.none and md is not None, code
    finally:
        await coordinator.stop()


async def test_an_add_waiting_for_a_commit_is_told_the_partition_moved_away(
    host: FakeHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An add that waits for the previous transaction's markers, while the id's partition
    moves to another broker, is answered NOT_COORDINATOR (the producer finds the new
    coordinator), not INVALID_PRODUCER_ID_MAPPING as if the id were unknown: its state left
    with the partition."""
    monkeypatch.setattr(txn_coordinator, "CONCURRENT_WAIT_S", 30.0)  # the wait never runs out
    topic = internal_topic(host, min_isr=None)
    markers = GatedMarkers()
    coordinator = TransactionCoordinator(topic, BrokerConfig(), markers=markers,
                                         producer_ids=FakeProducerIds(), metrics=FakeMetrics())
    await topic.ensure_created()
    await coordinator.start()
    try:
        await _settle(coordinator)
        init = await coordinator.init_producer_id("mover", 60_000, None)
        pid, epoch = init.producer_id, init.producer_epoch
        assert await coordinator.add_partitions("mover", pid, epoch, [("eos", 0)]) \
            == ErrorCode.none
        ended = await coordinator.end_transaction("mover", pid, epoch, True)
        assert ended.error_code == ErrorCode.none  # PREPARE_COMMIT: its markers wait
        add = asyncio.create_task(coordinator.add_partitions("mover", pid, epoch, [("eos", 0)]))
        for _ in range(5):
            await asyncio.sleep(0)
        assert not add.done()  # waiting for the commit to complete
        part = host.replica("__transaction_state", 0)
        assert isinstance(part, Partition)
        part.make_follower(2, part.leader_epoch + 1, [BROKER_ID, 2], [BROKER_ID, 2])
        coordinator.on_leadership(0, False)
        markers.gate.set()
        assert await asyncio.wait_for(add, 10) == ErrorCode.not_coordinator
    finally:
        await coordinator.stop()
