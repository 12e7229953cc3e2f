"""Printing results: aligned tables for people, JSON (stable keys, in a fixed order) for
scripts."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, TextIO

Columns = Sequence[tuple[str, str]]  # (header, key)


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list | tuple):
        return ",".join(cell(v) for v in value) or "-"
    if isinstance(value, dict):
        return ",".join(f"{k}={cell(v)}" for k, v in value.items()) or "-"
    return str(value)


def table(rows: Sequence[dict[str, Any]], columns: Columns, out: TextIO) -> None:
    """Columns as wide as their widest cell, two spaces apart; the last one not padded."""
    cells = [[h for h, _ in columns]] + [[cell(r.get(k)) for _, k in columns] for r in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    for line in cells:
        padded = [c.ljust(w) for c, w in zip(line[:-1], widths, strict=False)] + [line[-1]]
        print("  ".join(padded).rstrip(), file=out)


def as_json(value: Any, out: TextIO) -> None:
    json.dump(value, out, indent=2)
    out.write("\n")
