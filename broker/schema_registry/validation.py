"""Broker-side schema validation (Confluent Server's `confluent.key.schema.validation` and
`confluent.value.schema.validation` topic configs): before a Produce appends, each record's key
or value of a validated topic must start with Confluent's framing (magic byte 0, a 4-byte
schema id) and the id must be a schema registered under the record's subject, named by the
topic's subject name strategy. A partition whose batch has a record that does not is refused
as a whole with INVALID_RECORD and an error per such record (KIP-467); nothing of it is
appended. A null key or value (a tombstone) is not checked.

Ids are looked up in the registry: the primary's own state, or the primary's answer to
GET /schemas/ids/{id}/versions on another broker, kept for CACHE_S."""

from __future__ import annotations

import json
import logging
import struct
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from samsa.config.topic import SUBJECT_NAME_STRATEGIES, TOPIC_NAME_STRATEGY
from samsa.protocol.errors import ErrorCode
from samsa.protocol.records import decode_records, iter_batches

from ..replication.produce_appends import AppendResult, ProduceEntry
from . import errors
from .formats import AVRO, JSON, PROTOBUF

if TYPE_CHECKING:
    from ..cluster.metadata_store import MetadataStore
    from . import SchemaRegistry

log = logging.getLogger(__name__)

CACHE_S = 5.0  # how long another broker's answer about an id is trusted
_ID = struct.Struct(">i")
_RECORD_NAME, _TOPIC_RECORD_NAME = SUBJECT_NAME_STRATEGIES[1:]
Key = tuple[str, int]


def _enabled(configs: dict[str, str], part: str) -> bool:
    return configs.get(f"confluent.{part}.schema.validation", "false").lower() == "true"


def record_name(schema_type: str, schema: str) -> str | None:
    """The record's name the record-name strategies use: an Avro record's full name, a JSON
    Schema's title, a Protobuf file's first message (package-qualified)."""
    try:
        if schema_type == AVRO:
            doc = json.loads(schema)
            if isinstance(doc, dict) and "name" in doc:
                name = str(doc["name"])
                space = doc.get("namespace")
                return f"{space}.{name}" if space and "." not in name else name
        elif schema_type == JSON:
            doc = json.loads(schema)
            return str(doc["title"]) if isinstance(doc, dict) and "title" in doc else None
        elif schema_type == PROTOBUF:
            from .formats.protobuf import parse
            fd = parse(schema, ()).descriptor
            if fd.message_type:
                first = fd.message_type[0].name
                return f"{fd.package}.{first}" if fd.package else first
    except (ValueError, errors.RegistryError):
        return None
    return None


def _subject(strategy: str, topic: str, part: str, name: str | None) -> str | None:
    if strategy == _RECORD_NAME:
        return name
    if strategy == _TOPIC_RECORD_NAME:
        return f"{topic}-{name}" if name else None
    return f"{topic}-{part}"


class SchemaValidation:
    """The Produce handler's check of the entries it is about to append."""

    def __init__(self, metadata: MetadataStore, registry: SchemaRegistry | None) -> None:
        self.metadata = metadata
        self.registry = registry
        self._cache: dict[int, tuple[float, set[str], str | None]] = {}

    async def check(self, entries: Sequence[ProduceEntry]) -> dict[Key, AppendResult]:
        """The entries refused, by (topic, partition)."""
        refused: dict[Key, AppendResult] = {}
        for topic, index, records in entries:
            state = self.metadata.topic(topic)
            if state is None or not records:
                continue
            parts = [p for p in ("key", "value") if _enabled(state.configs, p)]
            if not parts:
                continue
            record_errors = await self._check_records(topic, state.configs, parts, records)
            if record_errors:
                refused[(topic, index)] = AppendResult(
                    ErrorCode.invalid_record, record_errors=record_errors,
                    error_message="One or more records have been rejected due to an invalid "
                                  "schema id")
                log.debug("produce to %s-%d refused: %s", topic, index, record_errors[:3])
        return refused

    async def _check_records(self, topic: str, configs: dict[str, str], parts: list[str],
                             records: bytes) -> list[tuple[int, str]]:
        """The batch's records that do not pass, by index. Each distinct schema id is looked
        up once per batch, not once per record."""
        decoded = [r for pos, header in iter_batches(records)
                   for r in decode_records(records, pos, header)]
        problems: dict[int, str] = {}
        for part in parts:
            strategy = configs.get(f"confluent.{part}.subject.name.strategy",
                                   TOPIC_NAME_STRATEGY)
            verdicts: dict[int, str | None] = {}  # schema id -> its problem (None: passes)
            for index, record in enumerate(decoded):
                data = record.key if part == "key" else record.value
                if data is None or index in problems:
                    continue
                if len(data) < 5 or data[0] != 0:
                    problems[index] = (f"Record {part} does not start with a schema id (magic "
                                       "byte 0 and 4 bytes)")
                    continue
                (schema_id,) = _ID.unpack_from(data, 1)
                if schema_id not in verdicts:
                    verdicts[schema_id] = await self._problem(topic, part, strategy, schema_id)
                if verdicts[schema_id] is not None:
                    problems[index] = str(verdicts[schema_id])
        return sorted(problems.items())

    async def _problem(self, topic: str, part: str, strategy: str, schema_id: int) -> str | None:
        """Why a key or value with this schema id does not pass (None: it does)."""
        subject: str | None = None
        for fresh in (False, True):  # a cached answer may predate the id's registration here
            found = await self._lookup(schema_id, fresh)
            if found is None:
                return f"Record {part} carries schema id {schema_id}, which is not registered"
            subjects, name = found
            subject = _subject(strategy, topic, part, name)
            if subject is not None and subject in subjects:
                return None
        return (f"Record {part} carries schema id {schema_id}, which is not registered "
                f"under subject {subject or '(the schema has no record name)'}")

    async def _lookup(self, schema_id: int, fresh: bool = False
                      ) -> tuple[set[str], str | None] | None:
        """The subjects holding the id (live versions) and its record name; None if none."""
        cached = self._cache.get(schema_id)
        if not fresh and cached is not None and time.monotonic() - cached[0] < CACHE_S:
            return cached[1], cached[2]
        if self.registry is None:
            return None  # no registry on this broker: nothing is registered
        try:
            found = await self._ask(self.registry, schema_id)
        except errors.RegistryError as exc:
            log.info("schema validation: schema id %d not looked up: %s", schema_id, exc.message)
            return None
        if found is None:
            self._cache.pop(schema_id, None)
            return None
        self._cache[schema_id] = (time.monotonic(), *found)
        return found

    @staticmethod
    async def _ask(registry: SchemaRegistry, schema_id: int
                   ) -> tuple[set[str], str | None] | None:
        try:
            await registry.registry.log.catch_up()
        except errors.RegistryError as exc:
            if not exc.forwardable:
                raise
            return await _ask_primary(registry, schema_id)
        live = [v for v in registry.store.by_id(schema_id) if not v.deleted]
        if not live:
            return None
        return {v.subject for v in live}, record_name(live[0].schema_type, live[0].schema)


async def _ask_primary(registry: SchemaRegistry, schema_id: int
                       ) -> tuple[set[str], str | None] | None:
    versions: Any = await registry.forwarder.get(f"/schemas/ids/{schema_id}/versions")
    if not versions:
        return None
    schema: Any = await registry.forwarder.get(f"/schemas/ids/{schema_id}")
    name = record_name(schema.get("schemaType") or AVRO, schema["schema"]) if schema else None
    return {str(v["subject"]) for v in versions}, name
