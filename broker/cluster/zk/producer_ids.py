"""The ZooKeeper metadata store's producer id blocks: /latest_producer_id_block, claimed by
compare-and-set (Kafka's ZkProducerIdManager)."""

from __future__ import annotations

import asyncio
import json

from kazoo.exceptions import BadVersionError

from .common import dumps as _dumps
from .session import ZkSession

PRODUCER_ID_BLOCK = "/latest_producer_id_block"


class ZkProducerIdBlocks:
    def __init__(self, session: ZkSession, broker_id: int) -> None:
        self._zk = session.zk
        self._broker_id = broker_id

    async def allocate(self, size: int) -> int:
        """Claim the next block of producer ids by compare-and-set; returns its first id."""
        return await asyncio.to_thread(self.claim, size)

    def claim(self, size: int) -> int:
        """Blocking (one ZooKeeper round trip per block of ids)."""
        self._zk.ensure_path(PRODUCER_ID_BLOCK)
        while True:
            data, stat = self._zk.get(PRODUCER_ID_BLOCK)
            start = int(json.loads(data)["block_end"]) + 1 if data else 0
            doc = {
                "version": 1,
                "broker": self._broker_id,
                "block_start": str(start),
                "block_end": str(start + size - 1),
            }
            try:
                self._zk.set(PRODUCER_ID_BLOCK, _dumps(doc), version=stat.version)
                return start
            except BadVersionError:
                continue
