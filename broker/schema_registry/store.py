"""The registry's state, rebuilt from the `_schemas` records in their order: every version of
every subject (soft-deleted ones kept, flagged), the global and per-subject configs and
modes."""

from __future__ import annotations

import logging
from typing import Any

from .records import SchemaValue

log = logging.getLogger(__name__)


class SchemaStore:
    def __init__(self) -> None:
        self.loads = 0  # how many times the store was emptied to be loaded again
        self.clear()

    def clear(self) -> None:
        self.loads += 1
        self.subjects: dict[str, dict[int, SchemaValue]] = {}
        self.configs: dict[str | None, dict[str, Any]] = {}  # None: the global config
        self.modes: dict[str | None, str] = {}
        self.max_id = 0

    # ---- applying the topic's records ----------------------------------------------------
    def apply(self, key: dict[str, Any], value: dict[str, Any] | None) -> None:
        kind = key.get("keytype")
        subject = key.get("subject")
        if kind == "SCHEMA":
            self._apply_schema(str(subject), int(key["version"]), value)
        elif kind == "CONFIG":
            self._set(self.configs, subject, value)
        elif kind == "MODE":
            self._set(self.modes, subject, None if value is None else value["mode"])
        elif kind == "DELETE_SUBJECT" and value is not None:
            for v in self.subjects.get(value["subject"], {}).values():
                if v.version <= int(value["version"]):
                    v.deleted = True
        elif kind not in ("NOOP", "CLEAR_SUBJECT", "CONTEXT", "DELETE_CONTEXT"):
            log.warning("_schemas: a record of unknown keytype %r skipped", kind)

    def _apply_schema(self, subject: str, version: int, value: dict[str, Any] | None) -> None:
        versions = self.subjects.setdefault(subject, {})
        if value is None:
            versions.pop(version, None)
            if not versions:
                del self.subjects[subject]
            return
        schema = SchemaValue.from_json(value)
        versions[version] = schema
        self.max_id = max(self.max_id, schema.id)

    @staticmethod
    def _set(table: dict[str | None, Any], subject: str | None, value: Any) -> None:
        if value is None:
            table.pop(subject, None)
        else:
            table[subject] = value

    # ---- queries ---------------------------------------------------------------------------
    def versions(self, subject: str, deleted: bool = False) -> list[SchemaValue]:
        """The subject's versions, oldest first (the soft-deleted ones too if `deleted`)."""
        return [v for _, v in sorted(self.subjects.get(subject, {}).items())
                if deleted or not v.deleted]

    def subject_names(self, deleted: bool = False) -> list[str]:
        return sorted(s for s in self.subjects if self.versions(s, deleted))

    def by_id(self, schema_id: int) -> list[SchemaValue]:
        """Every version (soft-deleted ones too) that holds the schema `schema_id`."""
        return [v for versions in self.subjects.values() for v in versions.values()
                if v.id == schema_id]

    def referenced_by(self, subject: str, version: int) -> list[int]:
        return sorted({v.id for versions in self.subjects.values() for v in versions.values()
                       if not v.deleted and any(r.subject == subject and r.version == version
                                                for r in v.references)})
