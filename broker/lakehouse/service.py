"""Iceberg topics: each broker writes the committed records of the Iceberg topic partitions it
leads into the topic's table, every iceberg.catalog.commit.interval.ms.

A round, per topic: read the table's next offsets (worker thread), read each led partition's
log from there up to its last stable offset (on the loop, in bounded chunks), keep the records
of committed transactions up to a point where no transaction is open (`Scanner`), and append
them in one Iceberg commit whose summary carries the new next offsets (worker thread). A crash
before the catalog swap leaves the table as it was and the next leader reads the same records
again; after it, the next leader starts where the commit ended."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from pathlib import Path
from typing import Any

from samsa.protocol.records import Record, iter_batches

from ..cluster.metadata_store import MetadataStore
from ..replication.partition import READ_COMMITTED, Partition
from ..replication.replica_manager import ReplicaManager
from ..schema_registry import SchemaRegistry
from . import values
from .scanner import Scanner
from .table import StaleOffsets, TopicTable, open_catalog

log = logging.getLogger(__name__)

MODE = "samsa.iceberg.mode"
READ_CHUNK = 1 << 20


def _scan_all(starts: dict[int, int], chunks: dict[int, list[bytes]]) -> dict[int, Scanner]:
    """Each partition's chunks through a Scanner (in the worker thread: decoding and
    decompressing the records is the costly part)."""
    scanners = {index: Scanner(start) for index, start in starts.items()}
    for index, scanner in scanners.items():
        for chunk in chunks[index]:
            scanner.feed(chunk)
    return scanners


class Lakehouse:
    def __init__(self, config: Any, replicas: ReplicaManager, metadata: MetadataStore,
                 data_dir: Path, schema_registry: SchemaRegistry | None) -> None:
        self.replicas = replicas
        self.schema_registry = schema_registry  # value_schema_id_prefix's schemas
        self.metadata = metadata
        self.interval_s = config["iceberg.catalog.commit.interval.ms"] / 1000
        self.target_bytes = config["iceberg.target.file.size.bytes"]
        self.kind = config["iceberg.catalog.type"]
        root = data_dir / "iceberg"
        self.uri = config["iceberg.catalog.uri"] or f"sqlite:///{root / 'catalog.db'}"
        self.warehouse = config["iceberg.warehouse"] or (root / "warehouse").as_uri()
        self._root = root
        self._catalog: Any = None
        self._tables: dict[str, TopicTable] = {}
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            for topic, partitions in self._led_iceberg_partitions().items():
                try:
                    await self.commit_round(topic, partitions)
                except StaleOffsets as exc:  # another writer committed first: read again
                    log.info("iceberg commit of %s: %s", topic, exc)
                except Exception:  # the next round reads the table again
                    log.exception("iceberg commit of %s failed", topic)

    def _led_iceberg_partitions(self) -> dict[str, list[Partition]]:
        found: dict[str, list[Partition]] = {}
        for p in self.replicas.partitions():
            if p.is_leader and self._mode(p.topic) != "disabled":
                found.setdefault(p.topic, []).append(p)
        return found

    def _mode(self, topic: str) -> str:
        state = self.metadata.topic(topic)
        return "disabled" if state is None else state.configs.get(MODE, "disabled")

    async def commit_round(self, topic: str, partitions: list[Partition]) -> int:
        """One Iceberg commit of what became stable in the partitions; the rows it added."""
        table = await asyncio.to_thread(self._table, topic)
        snapshot, offsets = await asyncio.to_thread(table.offsets)
        starts = {p.index: max(offsets.get(p.index, 0), p.log_start_offset) for p in partitions}
        chunks = {p.index: await self._read(p, starts[p.index]) for p in partitions}
        scanners = await asyncio.to_thread(_scan_all, starts, chunks)
        rows: list[tuple[int, Record]] = []
        next_offsets: dict[int, int] = {}
        for index, scanner in scanners.items():
            if scanner.safe > offsets.get(index, 0) or index not in offsets:
                next_offsets[index] = scanner.safe
                rows.extend((index, r) for r in scanner.ready)
        if not rows:  # only aborted or control records: read again next round
            return 0
        schemas = None
        if self._mode(topic) == "value_schema_id_prefix":
            ids = {values.schema_id(r.value) for _, r in rows}
            schemas = await values.fetch_schemas(self.schema_registry, sorted(ids))
        await asyncio.to_thread(table.commit, rows, next_offsets, snapshot, schemas)
        log.debug("iceberg: %d rows of %s committed, next offsets %s", len(rows), topic,
                  next_offsets)
        return len(rows)

    async def _read(self, partition: Partition, start: int) -> list[bytes]:
        """The partition's log from `start` up to its last stable offset, or until
        iceberg.target.file.size.bytes were read, in whole batches; the loop runs other work
        between two reads. Decoding them is the worker thread's (`_scan_all`)."""
        chunks: list[bytes] = []
        position, read = start, 0
        while position < partition.last_stable_offset and read < self.target_bytes:
            buf = partition.read(position, READ_CHUNK, READ_COMMITTED, True).records
            if not isinstance(buf, (bytes, bytearray, memoryview)) or not buf:
                break
            end = max((h.base_offset + h.last_offset_delta + 1 for _, h in iter_batches(buf)),
                      default=position)
            if end <= position:
                break
            chunks.append(bytes(buf))
            position, read = end, read + len(buf)
            await asyncio.sleep(0)
        return chunks

    def _table(self, topic: str) -> TopicTable:
        if self._catalog is None:
            self._root.mkdir(parents=True, exist_ok=True)
            (self._root / "warehouse").mkdir(exist_ok=True)
            self._catalog = open_catalog(self.kind, self.uri, self.warehouse)
        if topic not in self._tables:
            self._tables[topic] = TopicTable(self._catalog, topic, self.target_bytes)
        return self._tables[topic]
