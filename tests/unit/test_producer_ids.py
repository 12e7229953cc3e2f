from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from samsa.coordinator.producer_ids import (
    ClusterProducerIdAllocator,
    CorruptProducerIdState,
    PrefetchingProducerIds,
    ProducerIdAllocator,
    ProducerIdBlock,
    ProducerIdNotAvailable,
    ProducerIdSource,
)


def take(alloc: PrefetchingProducerIds, n: int = 1) -> list[int]:
    """n ids, waiting for block claims in between as a retrying client would."""
    out = []
    while len(out) < n:
        try:
            out.append(alloc.next_id())
        except ProducerIdNotAvailable:
            assert alloc.wait_for_block(10)
    return out


def test_ids_are_sequential_within_a_block(tmp_path: Path) -> None:
    alloc = ProducerIdAllocator(tmp_path / "pid", block_size=3)
    assert take(alloc, 7) == list(range(7))
    assert alloc.current_block == ProducerIdBlock(6, 3)
    assert json.loads((tmp_path / "pid").read_text())["next_block_start"] == 9


def test_block_end_is_persisted_before_first_id(tmp_path: Path) -> None:
    alloc = ProducerIdAllocator(tmp_path / "pid", block_size=10)
    assert not (tmp_path / "pid").exists()
    take(alloc)
    assert json.loads((tmp_path / "pid").read_text())["next_block_start"] == 10
    assert not (tmp_path / "pid.tmp").exists()


def test_never_reused_across_reopen(tmp_path: Path) -> None:
    seen: set[int] = set()
    for _ in range(4):
        alloc = ProducerIdAllocator(tmp_path / "pid", block_size=5)
        ids = take(alloc, 3)
        assert seen.isdisjoint(ids)
        seen.update(ids)
    assert min(seen) == 0


def test_never_reused_after_kill_9(tmp_path: Path) -> None:
    state = tmp_path / "pid"
    script = (
        "import os, sys\n"
        "from samsa.coordinator.producer_ids import ProducerIdAllocator\n"
        f"a = ProducerIdAllocator({str(state)!r}, block_size=4)\n"
        "for _ in range(6):\n"
        "    assert a.wait_for_block(10)\n"
        "    print(a.next_id(), flush=True)\n"
        "os.kill(os.getpid(), 9)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True,
        cwd=Path(__file__).resolve().parents[2], env={**os.environ}, check=False,
    )
    assert out.returncode == -9
    handed_out = [int(x) for x in out.stdout.split()]
    assert handed_out == list(range(6))
    after = take(ProducerIdAllocator(state, block_size=4))[0]
    assert after > max(handed_out)


def test_corrupt_state_is_refused(tmp_path: Path) -> None:
    (tmp_path / "pid").write_text("{not json")
    with pytest.raises(CorruptProducerIdState):
        ProducerIdAllocator(tmp_path / "pid")


def test_satisfies_protocol(tmp_path: Path) -> None:
    alloc = ProducerIdAllocator(tmp_path / "pid")
    alloc.start()
    assert alloc.wait_for_block(10)
    src: ProducerIdSource = alloc
    assert src.next_id() == 0


def test_next_id_never_waits_for_a_claim() -> None:
    """A slow claim (a ZooKeeper round trip) does not block next_id: it raises the retriable
    COORDINATOR_LOAD_IN_PROGRESS until the block is there."""
    release = threading.Event()
    claims: list[str] = []

    def slow_claim(size: int) -> int:
        claims.append(threading.current_thread().name)
        assert release.wait(10)
        return 1000 * len(claims)

    alloc = ClusterProducerIdAllocator(slow_claim, block_size=10)
    started = time.monotonic()
    with pytest.raises(ProducerIdNotAvailable) as err:
        alloc.next_id()
    assert err.value.error_code == 14
    assert time.monotonic() - started < 5  # did not wait for the 10 s claim
    release.set()
    assert alloc.wait_for_block(10)
    assert take(alloc, 3) == [1000, 1001, 1002]
    assert claims == ["producer-id-block"]


def test_next_block_is_prefetched_at_90_percent() -> None:
    claimed: list[int] = []

    def claim(size: int) -> int:
        claimed.append(size)
        return 100 * len(claimed)

    alloc = ClusterProducerIdAllocator(claim, block_size=10)
    alloc.start()
    assert alloc.wait_for_block(10)
    assert take(alloc, 9) == list(range(100, 109))
    assert claimed == [10]  # no second claim before 90 % are used
    take(alloc)  # id 109, handed out with 90 % used: as Kafka, first id + 0.9 x size
    deadline = time.monotonic() + 10
    while len(claimed) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert claimed == [10, 10]
    assert alloc.wait_for_block(10)
    # the prefetched block follows without a failed call in between
    assert [alloc.next_id() for _ in range(3)] == [200, 201, 202]


def test_a_failed_claim_is_retried() -> None:
    attempts: list[int] = []

    def flaky_claim(size: int) -> int:
        attempts.append(size)
        if len(attempts) == 1:
            raise ConnectionError("ZooKeeper session moved")
        return 500

    alloc = ClusterProducerIdAllocator(flaky_claim, block_size=5)
    alloc.start()
    assert take(alloc, 2) == [500, 501]
    assert len(attempts) == 2
