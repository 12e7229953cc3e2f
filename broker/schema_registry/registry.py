"""The registry's operations, as the REST routes call them: each returns the JSON answer or
raises RegistryError. Reads answer from the store; writes check against it, append their
records to `_schemas` through the SchemasLog and act only once it has them (the log applies
them to the store as it reads them back)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Protocol

from . import errors
from .compatibility import DEFAULT_LEVEL, check_level, incompatibilities
from .formats import AVRO, PROTOBUF, ParsedSchema, Reference, parse
from .records import (
    SchemaRef,
    SchemaValue,
    config_key,
    delete_subject_key,
    encode,
    mode_key,
    parse_references,
    schema_key,
)
from .store import SchemaStore

MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
_MAX_VERSION = 2**31 - 1


class SchemasLog(Protocol):
    async def catch_up(self) -> None:
        """Apply the records appended since the last call to the store."""
        ...

    async def write(self, records: list[tuple[bytes, bytes | None]]) -> None:
        """Append the records and return once they are replicated and applied to the store;
        RegistryError when this broker cannot write them (not the primary, a timeout)."""
        ...


def parse_version(version: str) -> int | None:
    """A version of the URL: its number, or None for the latest ("latest" or -1)."""
    if version in ("latest", "-1"):
        return None
    try:
        number = int(version)
    except ValueError:
        raise errors.invalid_version(version) from None
    if not 1 <= number <= _MAX_VERSION:
        raise errors.invalid_version(version)
    return number


def answer(v: SchemaValue) -> dict[str, Any]:
    """A version as the REST API shows it."""
    out: dict[str, Any] = {"subject": v.subject, "version": v.version, "id": v.id}
    if v.schema_type != AVRO:
        out["schemaType"] = v.schema_type
    if v.references:
        out["references"] = [r.to_json() for r in v.references]
    out["schema"] = v.schema
    return out


class Registry:
    def __init__(self, store: SchemaStore, log: SchemasLog) -> None:
        self.store = store
        self.log = log
        self._parsed: dict[int, ParsedSchema] = {}  # by schema id: an id names one schema
        self._parsed_loads = store.loads  # ... within one load of the store
        self._write_lock = asyncio.Lock()  # one write at a time: each checks the state

    # ---- parsing ---------------------------------------------------------------------------
    def _references(self, refs: Sequence[SchemaRef], depth: int = 0) -> tuple[Reference, ...]:
        if depth > 32:
            raise errors.invalid_schema("references nest too deep (a cycle?)")
        out = []
        for ref in refs:
            target = self._version(ref.subject, ref.version, deleted=True)
            if target is None:
                raise errors.invalid_schema(
                    f"reference {ref.name} to {ref.subject} version {ref.version} not found")
            out.append(Reference(ref.name, target.schema_type, target.schema,
                                 self._references(target.references, depth + 1)))
        return tuple(out)

    def _parse_body(self, body: Any) -> tuple[SchemaValue, ParsedSchema]:
        """The schema of a request body ({"schema", "schemaType", "references"}), parsed."""
        if not isinstance(body, dict) or not isinstance(body.get("schema"), str):
            raise errors.invalid_schema("the request has no schema")
        try:
            refs = parse_references(body.get("references"))
        except (KeyError, TypeError, ValueError) as exc:
            raise errors.invalid_schema(f"bad references: {exc}") from exc
        schema_type = (body.get("schemaType") or AVRO).upper()
        value = SchemaValue("", 0, 0, body["schema"], schema_type, refs)
        parsed = parse(schema_type, value.schema, self._references(refs))
        value.canonical = parsed.canonical
        return value, parsed

    def parsed(self, v: SchemaValue) -> ParsedSchema:
        if self._parsed_loads != self.store.loads:  # another primary may have reused ids
            self._parsed.clear()
            self._parsed_loads = self.store.loads
        if v.id not in self._parsed:
            self._parsed[v.id] = parse(v.schema_type, v.schema, self._references(v.references))
        return self._parsed[v.id]

    @staticmethod
    def shown(v: SchemaValue, fmt: str | None) -> dict[str, Any]:
        """`answer(v)` in the format asked: a Protobuf schema is .proto text by default and
        the base64 FileDescriptorProto with `serialized`, whichever way it was registered."""
        out = answer(v)
        if v.schema_type == PROTOBUF:
            from .formats.protobuf import formatted
            out["schema"] = formatted(v.schema, fmt)
        return out

    def _same(self, v: SchemaValue, new: SchemaValue) -> bool:
        return (v.schema_type == new.schema_type and v.references == new.references
                and self.parsed(v).canonical == new.canonical)

    # ---- lookups ---------------------------------------------------------------------------
    def _version(self, subject: str, version: int | None, deleted: bool = False
                 ) -> SchemaValue | None:
        versions = self.store.versions(subject, deleted)
        if version is None:
            return versions[-1] if versions else None
        return next((v for v in versions if v.version == version), None)

    def version(self, subject: str, version: str, deleted: bool = False) -> SchemaValue:
        number = parse_version(version)
        if not self.store.versions(subject, deleted):
            raise errors.subject_not_found(subject)
        found = self._version(subject, number, deleted)
        if found is None:
            raise errors.version_not_found(subject, version)
        return found

    def schema_by_id(self, schema_id: int, subject: str | None = None) -> SchemaValue:
        holders = self.store.by_id(schema_id)
        if subject:
            holders = [v for v in holders if v.subject == subject] or holders
        if not holders:
            raise errors.schema_not_found(f"Schema {schema_id} not found")
        return holders[0]

    def subjects(self, deleted: bool = False, prefix: str = "") -> list[str]:
        return [s for s in self.store.subject_names(deleted) if s.startswith(prefix)]

    def version_numbers(self, subject: str, deleted: bool = False) -> list[int]:
        versions = self.store.versions(subject, deleted)
        if not versions:
            raise errors.subject_not_found(subject)
        return [v.version for v in versions]

    def lookup(self, subject: str, body: Any, deleted: bool = False) -> dict[str, Any]:
        if not self.store.versions(subject, deleted=True):
            raise errors.subject_not_found(subject)
        new, _ = self._parse_body(body)
        for v in reversed(self.store.versions(subject, deleted)):
            if self._same(v, new):
                return answer(v)
        raise errors.schema_not_found()

    # ---- configs and modes -----------------------------------------------------------------
    def level(self, subject: str | None) -> str:
        config = self.store.configs.get(subject) if subject is not None else None
        config = config or self.store.configs.get(None) or {}
        return str(config.get("compatibilityLevel", DEFAULT_LEVEL))

    def get_config(self, subject: str | None, default_to_global: bool = False) -> dict[str, Any]:
        if subject is not None and subject not in self.store.configs and not default_to_global:
            raise errors.not_found(errors.SUBJECT_CONFIG_NOT_FOUND, subject)
        return {"compatibilityLevel": self.level(subject)}

    async def set_config(self, subject: str | None, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise errors.invalid_compatibility(None)
        level = check_level(body.get("compatibility", body.get("compatibilityLevel")))
        async with self._write_lock:
            self._check_writable(subject)
            await self.log.write([(config_key(subject), encode({"compatibilityLevel": level}))])
        return {"compatibility": level}

    async def delete_config(self, subject: str | None) -> dict[str, Any]:
        async with self._write_lock:
            if subject is not None and subject not in self.store.configs:
                raise errors.not_found(errors.SUBJECT_CONFIG_NOT_FOUND, subject)
            old = self.get_config(subject, default_to_global=True)
            if subject in self.store.configs:
                await self.log.write([(config_key(subject), None)])
        return old

    def mode(self, subject: str | None) -> str:
        if subject is not None and subject in self.store.modes:
            return self.store.modes[subject]
        return self.store.modes.get(None, "READWRITE")

    def get_mode(self, subject: str | None, default_to_global: bool = False) -> dict[str, Any]:
        if subject is not None and subject not in self.store.modes and not default_to_global:
            raise errors.not_found(errors.SUBJECT_MODE_NOT_FOUND, subject)
        return {"mode": self.mode(subject)}

    async def set_mode(self, subject: str | None, body: Any, force: bool) -> dict[str, Any]:
        mode = body.get("mode") if isinstance(body, dict) else None
        if not isinstance(mode, str) or mode.upper() not in MODES:
            raise errors.invalid_mode(mode)
        mode = mode.upper()
        async with self._write_lock:
            await self.log.catch_up()
            has_schemas = self.store.versions(subject) if subject else self.store.subject_names()
            if mode == "IMPORT" and has_schemas and not force:
                raise errors.operation_not_permitted(
                    "Cannot import since found existing subjects")
            await self.log.write([(mode_key(subject), encode({"mode": mode}))])
        return {"mode": mode}

    async def delete_mode(self, subject: str) -> dict[str, Any]:
        async with self._write_lock:
            if subject not in self.store.modes:
                raise errors.not_found(errors.SUBJECT_MODE_NOT_FOUND, subject)
            old = self.store.modes[subject]
            await self.log.write([(mode_key(subject), None)])
        return {"mode": old}

    def _check_writable(self, subject: str | None) -> None:
        if self.mode(subject) in ("READONLY", "READONLY_OVERRIDE"):
            raise errors.operation_not_permitted(
                f"Subject {subject or ''} is in read-only mode")

    # ---- compatibility ---------------------------------------------------------------------
    def test_compatibility(self, subject: str, version: str | None, body: Any
                           ) -> dict[str, Any]:
        _, parsed = self._parse_body(body)
        level = self.level(subject)
        if version is None:
            against = self.store.versions(subject)
        else:
            number = parse_version(version)
            found = self._version(subject, number)
            if found is None and number is not None:
                if not self.store.versions(subject, deleted=True):
                    raise errors.subject_not_found(subject)
                raise errors.version_not_found(subject, version)
            against = [found] if found is not None else []
            level = level.removesuffix("_TRANSITIVE")
        messages = incompatibilities(level, parsed, [self.parsed(v) for v in against])
        return {"is_compatible": not messages, "messages": messages}

    # ---- registering -----------------------------------------------------------------------
    async def register(self, subject: str, body: Any) -> dict[str, Any]:
        async with self._write_lock:
            await self.log.catch_up()
            return await self._register(subject, body)

    async def _register(self, subject: str, body: Any) -> dict[str, Any]:
        mode = self.mode(subject)
        if mode in ("READONLY", "READONLY_OVERRIDE"):
            raise errors.operation_not_permitted(f"Subject {subject} is in read-only mode")
        new, parsed = self._parse_body(body)
        live = self.store.versions(subject)
        for v in live:
            if self._same(v, new):
                return answer(v)
        wanted_id = body.get("id") if mode == "IMPORT" else None
        if mode != "IMPORT":
            messages = incompatibilities(self.level(subject), parsed,
                                         [self.parsed(v) for v in live])
            if messages:
                raise errors.incompatible(messages)
        new.subject = subject
        new.id = self._id_for(new, wanted_id)
        every = self.store.versions(subject, deleted=True)
        new.version = int(body.get("version") or 0) if mode == "IMPORT" else 0
        new.version = new.version or (every[-1].version + 1 if every else 1)
        await self.log.write([(schema_key(subject, new.version), encode(new.to_json()))])
        self._parsed.setdefault(new.id, parsed)
        return answer(new)

    def _id_for(self, new: SchemaValue, wanted: Any) -> int:
        """The id of the same schema registered anywhere, else the next free one."""
        if wanted is not None:
            holders = self.store.by_id(int(wanted))
            if holders and not self._same(holders[0], new):
                raise errors.RegistryError(
                    422, 42207, f"Overwrite new schema with id {wanted} is not permitted.")
            return int(wanted)
        for versions in self.store.subjects.values():
            for v in versions.values():
                if self._same(v, new):
                    return v.id
        return self.store.max_id + 1

    # ---- deleting --------------------------------------------------------------------------
    def _check_unreferenced(self, versions: list[SchemaValue]) -> None:
        for v in versions:
            if self.store.referenced_by(v.subject, v.version):
                raise errors.referenced(v.subject, v.version)

    async def delete_subject(self, subject: str, permanent: bool) -> list[int]:
        async with self._write_lock:
            await self.log.catch_up()
            self._check_writable(subject)
            every = self.store.versions(subject, deleted=True)
            live = self.store.versions(subject)
            if not every:
                raise errors.subject_not_found(subject)
            if permanent:
                if live:
                    raise errors.not_found(errors.SUBJECT_NOT_SOFT_DELETED, subject)
                records: list[tuple[bytes, bytes | None]] = [
                    (schema_key(subject, v.version), None) for v in every]
                records += [(config_key(subject), None)] if subject in self.store.configs else []
                records += [(mode_key(subject), None)] if subject in self.store.modes else []
                records.append((delete_subject_key(subject), None))  # compacted away too
                await self.log.write(records)
                self._parsed.clear()  # an id held by no version any more may be given again
                return [v.version for v in every]
            if not live:
                raise errors.not_found(errors.SUBJECT_SOFT_DELETED, subject)
            self._check_unreferenced(live)
            await self.log.write(self._soft_deletes(live) + [(delete_subject_key(subject), encode(
                {"subject": subject, "version": live[-1].version}))])
            return [v.version for v in live]

    @staticmethod
    def _soft_deletes(versions: list[SchemaValue]) -> list[tuple[bytes, bytes | None]]:
        out = []
        for v in versions:
            doc = v.to_json()
            doc["deleted"] = True
            out.append((schema_key(v.subject, v.version), encode(doc)))
        return out

    async def delete_version(self, subject: str, version: str, permanent: bool) -> int:
        async with self._write_lock:
            await self.log.catch_up()
            self._check_writable(subject)
            # a soft-deleted version is found (to say so), but "latest" is the live one
            target = self.version(subject, version,
                                  deleted=permanent or parse_version(version) is not None)
            if permanent:
                if not target.deleted:
                    raise errors.not_found(errors.VERSION_NOT_SOFT_DELETED, subject, target.version)
                await self.log.write([(schema_key(subject, target.version), None)])
                self._parsed.clear()
                return target.version
            if target.deleted:
                raise errors.not_found(errors.VERSION_SOFT_DELETED, subject, target.version)
            self._check_unreferenced([target])
            await self.log.write(self._soft_deletes([target]))
            return target.version
