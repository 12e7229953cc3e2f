"""Producer id allocation: ids are unique and never reused, across restarts and crashes.

Like Kafka's controller, ids are handed out from blocks; the end of a block is made durable
before any id in it is used, so after a crash the next block starts past every id that could
have been handed out (at most one block's worth of ids is skipped). Blocks are claimed in a
background thread, ahead of need, so `next_id` (called on the event loop) never waits on
ZooKeeper or the disk; see `PrefetchingProducerIds`.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from samsa.protocol.errors import ErrorCode, KafkaError

from .ports import ProducerIdSource as ProducerIdSource  # the interface the allocators implement

log = logging.getLogger(__name__)

MAX_PRODUCER_ID = 2**63 - 1
_STATE_VERSION = 0
PREFETCH_THRESHOLD = 0.90  # Kafka's ProducerIdManager.PidPrefetchThreshold
RETRY_BACKOFF_MS = 50  # Kafka's RPCProducerIdManager.RetryBackoffMs


class ProducerIdsExhausted(Exception):
    pass


class CorruptProducerIdState(Exception):
    """The state file is unreadable; refusing to guess avoids handing out ids twice."""


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


class ProducerIdNotAvailable(KafkaError):
    """No producer id is available right now: the next block is still being claimed. Kafka
    answers InitProducerId with COORDINATOR_LOAD_IN_PROGRESS then (retriable: clients retry
    after their backoff), as its RPCProducerIdManager does."""

    error_code = ErrorCode.coordinator_load_in_progress


class PrefetchingProducerIds:
    """Hands out ids from blocks claimed in a background thread (Kafka's
    RPCProducerIdManager; a `samsa.coordinator.ports.ProducerIdSource`): `next_id` never waits for
    a claim (a ZooKeeper round trip, an fsync), it raises ProducerIdNotAvailable when the
    current block is used up before the next one arrived. The next block is claimed once
    90 % of the current one is handed out; a failed claim is retried no sooner than
    `retry_backoff_ms` later."""

    def __init__(self, claim_block: Callable[[], ProducerIdBlock], *,
                 retry_backoff_ms: int = RETRY_BACKOFF_MS) -> None:
        self._claim = claim_block
        self._retry_backoff_s = retry_backoff_ms / 1000
        self._lock = threading.Lock()
        self._block: ProducerIdBlock | None = None
        self._next = 0
        self._next_block: ProducerIdBlock | None = None
        self._claiming = False
        self._retry_at = 0.0

    def start(self) -> None:
        """Claim the first block now (in the background), so that the first InitProducerId
        does not have to ask for it."""
        with self._lock:
            self._maybe_claim_locked()

    def next_id(self) -> int:
        with self._lock:
            block = self._block
            if block is None or self._next > block.last_id:
                if self._next_block is None:
                    self._maybe_claim_locked()
                    raise ProducerIdNotAvailable("producer id block is used up; waiting for the "
                                                 "next block")
                block, self._block, self._next_block = self._next_block, self._next_block, None
                self._next = block.first_id
            pid = self._next
            self._next += 1
            if pid >= block.first_id + int(block.size * PREFETCH_THRESHOLD):
                self._maybe_claim_locked()
            return pid

    def wait_for_block(self, timeout: float) -> bool:
        """Block until an id is available (or `timeout` seconds passed); not for the event
        loop. True if `next_id` will then succeed."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                block = self._block
                if (block is not None and self._next <= block.last_id) or self._next_block:
                    return True
                self._maybe_claim_locked()
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.005)

    @property
    def current_block(self) -> ProducerIdBlock | None:
        return self._block

    def _maybe_claim_locked(self) -> None:
        if self._claiming or self._next_block is not None or time.monotonic() < self._retry_at:
            return
        self._claiming = True
        threading.Thread(target=self._claim_in_background, name="producer-id-block",
                         daemon=True).start()

    def _claim_in_background(self) -> None:
        try:
            block = self._claim()
        except Exception as exc:
            log.warning("claiming a block of producer ids failed (retrying): %r", exc)
            with self._lock:
                self._claiming = False
                self._retry_at = time.monotonic() + self._retry_backoff_s
        else:
            with self._lock:
                self._claiming = False
                self._next_block = block


class ProducerIdAllocator(PrefetchingProducerIds):
    """Single-node source persisting the next unallocated block start in `state_file`; each
    block is claimed (an fsync) in the background."""

    def __init__(self, state_file: Path, block_size: int = 1000) -> None:
        if block_size <= 0:
            raise ValueError("block_size must be positive")
        self.state_file = Path(state_file)
        self.block_size = block_size
        self._next_block_start = self._read_state()
        super().__init__(self._allocate_block)

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
        # Only the one claiming thread runs this at a time.
        first = self._next_block_start
        size = min(self.block_size, MAX_PRODUCER_ID - first + 1)
        if size <= 0:
            raise ProducerIdsExhausted("all producer ids have been allocated")
        block = ProducerIdBlock(first, size)
        doc = {"version": _STATE_VERSION, "next_block_start": block.next_block_first_id}
        _write_durably(self.state_file, json.dumps(doc).encode() + b"\n")
        self._next_block_start = block.next_block_first_id
        return block


class ClusterProducerIdAllocator(PrefetchingProducerIds):
    """Producer ids from blocks claimed cluster-wide (ZooKeeper's /latest_producer_id_block,
    compare-and-set), so no two brokers ever hand out the same id. `claim_block(size)`
    (blocking: ZooKeeper round trips) returns the first id of a fresh block; it runs in the
    background about once per `block_size` ids."""

    def __init__(self, claim_block: Callable[[int], int], block_size: int = 1000) -> None:
        self.block_size = block_size
        super().__init__(lambda: ProducerIdBlock(claim_block(block_size), block_size))
