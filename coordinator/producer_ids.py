"""Producer id allocation: ids are unique and never reused, across restarts and crashes.

Like Kafka's controller, ids are handed out from blocks; the end of a block is made durable
before any id in it is used, so after a crash the next block starts past every id that could
have been handed out (at most one block's worth of ids is skipped). A ZooKeeper- or
controller-backed source can replace `ProducerIdAllocator` behind `ProducerIdSource`.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

MAX_PRODUCER_ID = 2**63 - 1
_STATE_VERSION = 0


class ProducerIdsExhausted(Exception):
    pass


class CorruptProducerIdState(Exception):
    """The state file is unreadable; refusing to guess avoids handing out ids twice."""


class ProducerIdSource(Protocol):
    def next_id(self) -> int: ...


@dataclass(frozen=True, slots=True)
class ProducerIdBlock:
    first_id: int
    size: int

    @property
    def last_id(self) -> int:
        return self.first_id + self.size - 1

    @property
    def next_block_first_id(self) -> int:
        return self.first_id + self.size


def _write_durably(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)  # makes the rename itself survive a power loss
    finally:
        os.close(dfd)


class ProducerIdAllocator:
    """Single-node allocator persisting the next unallocated block start in `state_file`.

    `next_id` may fsync (once per block); callers on an event loop should keep block_size large
    enough that this is rare, or call it in an executor.
    """

    def __init__(self, state_file: Path, block_size: int = 1000) -> None:
        if block_size <= 0:
            raise ValueError("block_size must be positive")
        self.state_file = Path(state_file)
        self.block_size = block_size
        self._lock = threading.Lock()
        self._next_block_start = self._read_state()
        self._block: ProducerIdBlock | None = None
        self._next = 0

    def _read_state(self) -> int:
        try:
            raw = self.state_file.read_bytes()
        except FileNotFoundError:
            return 0
        try:
            doc = json.loads(raw)
            if doc["version"] != _STATE_VERSION:
                raise CorruptProducerIdState(f"unknown version {doc['version']}")
            start = doc["next_block_start"]
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptProducerIdState(f"{self.state_file}: {exc}") from exc
        if not isinstance(start, int) or start < 0:
            raise CorruptProducerIdState(f"{self.state_file}: bad next_block_start {start!r}")
        return start

    def _allocate_block(self) -> ProducerIdBlock:
        first = self._next_block_start
        size = min(self.block_size, MAX_PRODUCER_ID - first + 1)
        if size <= 0:
            raise ProducerIdsExhausted("all producer ids have been allocated")
        block = ProducerIdBlock(first, size)
        doc = {"version": _STATE_VERSION, "next_block_start": block.next_block_first_id}
        _write_durably(self.state_file, json.dumps(doc).encode() + b"\n")
        self._next_block_start = block.next_block_first_id
        return block

    def next_id(self) -> int:
        with self._lock:
            if self._block is None or self._next > self._block.last_id:
                self._block = self._allocate_block()
                self._next = self._block.first_id
            pid = self._next
            self._next += 1
            return pid

    @property
    def current_block(self) -> ProducerIdBlock | None:
        return self._block


class ClusterProducerIdAllocator:
    """Producer ids from blocks claimed cluster-wide (ZooKeeper's /latest_producer_id_block,
    compare-and-set), so no two brokers ever hand out the same id. `claim_block(size)` returns
    the first id of a fresh block; it runs about once per `block_size` ids."""

    def __init__(self, claim_block: Callable[[int], int], block_size: int = 1000) -> None:
        self._claim = claim_block
        self.block_size = block_size
        self._block: ProducerIdBlock | None = None
        self._next = 0
        self._lock = threading.Lock()

    def next_id(self) -> int:
        with self._lock:
            if self._block is None or self._next > self._block.last_id:
                self._block = ProducerIdBlock(self._claim(self.block_size), self.block_size)
                self._next = self._block.first_id
            pid = self._next
            self._next += 1
            return pid
