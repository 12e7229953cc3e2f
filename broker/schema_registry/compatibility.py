"""Compatibility levels: which earlier versions a new schema is checked against, and in which
direction (BACKWARD: the new schema reads the old data; FORWARD: the old schemas read the new
data; FULL: both; _TRANSITIVE: every earlier version, not only the latest)."""

from __future__ import annotations

from collections.abc import Sequence

from .errors import invalid_compatibility
from .formats import ParsedSchema

LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL",
          "FULL_TRANSITIVE")
DEFAULT_LEVEL = "BACKWARD"  # Confluent's schema.compatibility.level default


def check_level(level: object) -> str:
    if not isinstance(level, str) or level.upper() not in LEVELS:
        raise invalid_compatibility(level)
    return level.upper()


def incompatibilities(level: str, new: ParsedSchema,
                      previous: Sequence[ParsedSchema]) -> list[str]:
    """Why `new` may not follow `previous` (oldest first) under `level`; empty: it may."""
    if level == "NONE" or not previous:
        return []
    against = previous if level.endswith("_TRANSITIVE") else previous[-1:]
    base = level.removesuffix("_TRANSITIVE")
    errors: list[str] = []
    for old in reversed(against):  # newest first, as Confluent reports them
        if old.schema_type != new.schema_type:
            errors.append(f"SCHEMA_TYPE_CHANGED: {old.schema_type} to {new.schema_type}")
            continue
        if base in ("BACKWARD", "FULL"):
            errors += new.read_errors(old)
        if base in ("FORWARD", "FULL"):
            errors += old.read_errors(new)
    return errors
