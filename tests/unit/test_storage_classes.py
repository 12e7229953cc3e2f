"""Issue 48's bound on object size, for the storage layer: no class there has more than 40
methods (properties counted), so a reader can hold one in mind; `Log` keeps its parts
(validation, reads, offsets, retention, flush, I/O failures) in modules of their own."""

from __future__ import annotations

import ast
from pathlib import Path

STORAGE = Path(__file__).resolve().parents[2] / "storage"
MAX_METHODS = 40


def _method_counts() -> dict[str, int]:
    counts = {}
    for path in sorted(STORAGE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                methods = [m for m in node.body
                           if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef)]
                counts[f"{path.name}:{node.name}"] = len(methods)
    return counts


def test_no_storage_class_has_more_than_40_methods() -> None:
    counts = _method_counts()
    assert "log.py:Log" in counts  # the walk found the classes
    assert {name: n for name, n in counts.items() if n > MAX_METHODS} == {}
