from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from coordinator.producer_ids import (
    CorruptProducerIdState,
    ProducerIdAllocator,
    ProducerIdBlock,
    ProducerIdSource,
)


def test_ids_are_sequential_within_a_block(tmp_path: Path) -> None:
    alloc = ProducerIdAllocator(tmp_path / "pid", block_size=3)
    assert [alloc.next_id() for _ in range(7)] == list(range(7))
    assert alloc.current_block == ProducerIdBlock(6, 3)
    assert json.loads((tmp_path / "pid").read_text())["next_block_start"] == 9


def test_block_end_is_persisted_before_first_id(tmp_path: Path) -> None:
    alloc = ProducerIdAllocator(tmp_path / "pid", block_size=10)
    assert not (tmp_path / "pid").exists()
    alloc.next_id()
    assert json.loads((tmp_path / "pid").read_text())["next_block_start"] == 10
    assert not (tmp_path / "pid.tmp").exists()


def test_never_reused_across_reopen(tmp_path: Path) -> None:
    seen: set[int] = set()
    for _ in range(4):
        alloc = ProducerIdAllocator(tmp_path / "pid", block_size=5)
        ids = [alloc.next_id() for _ in range(3)]
        assert seen.isdisjoint(ids)
        seen.update(ids)
    assert min(seen) == 0


def test_never_reused_after_kill_9(tmp_path: Path) -> None:
    state = tmp_path / "pid"
    script = (
        "import os, sys\n"
        "from coordinator.producer_ids import ProducerIdAllocator\n"
        f"a = ProducerIdAllocator({str(state)!r}, block_size=4)\n"
        "for _ in range(6):\n"
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
    after = ProducerIdAllocator(state, block_size=4).next_id()
    assert after > max(handed_out)


def test_corrupt_state_is_refused(tmp_path: Path) -> None:
    (tmp_path / "pid").write_text("{not json")
    with pytest.raises(CorruptProducerIdState):
        ProducerIdAllocator(tmp_path / "pid")


def test_satisfies_protocol(tmp_path: Path) -> None:
    src: ProducerIdSource = ProducerIdAllocator(tmp_path / "pid")
    assert src.next_id() == 0
