"""Contracts of the whole product, beyond the handlers (tests/unit/test_handler_contracts.py):
error codes are ErrorCode members wherever they are compared, an exception that carries a
code is a KafkaError, and a partition's log is replaced only by its Partition."""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator
from pathlib import Path

from samsa.protocol.errors import KafkaError

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ("config", "protocol", "storage", "coordinator", "broker")


def _modules() -> Iterator[tuple[Path, ast.Module]]:
    for layer in LAYERS:
        for path in sorted((ROOT / layer).rglob("*.py")):
            yield path, ast.parse(path.read_text(encoding="utf-8"), str(path))


def _where(path: Path, node: ast.AST) -> str:
    return f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"


def _is_int(node: ast.expr) -> bool:
    return (isinstance(node, ast.Constant) and isinstance(node.value, int)
            and not isinstance(node.value, bool))


def test_error_codes_are_compared_with_members() -> None:
    """`r.error_code != 0` hides which code is meant: `ErrorCode.none`."""
    found = []
    for path, tree in _modules():
        for node in ast.walk(tree):
            if (isinstance(node, ast.Compare)
                    and ast.unparse(node.left).endswith("error_code")
                    and any(_is_int(c) for c in node.comparators)):
                found.append(f"{_where(path, node)} {ast.unparse(node)}")
    assert not found, found


def _takes_error_code(cls: ast.ClassDef) -> bool:
    for item in cls.body:
        if isinstance(item, ast.FunctionDef) and item.name == "__init__":
            return any(a.annotation is not None and "ErrorCode" in ast.unparse(a.annotation)
                       for a in item.args.args + item.args.kwonlyargs)
        if (isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
                and item.target.id == "error_code"):
            return True
    return False


def test_exceptions_carrying_a_code_are_kafka_errors() -> None:
    """Every exception made with an ErrorCode derives from KafkaError (protocol/errors.py), so
    one `except KafkaError` and `exc.error_code` answer it. config/ sits below protocol: its
    errors carry kio's ErrorCode without it."""
    found = []
    for path, tree in _modules():
        rel = path.relative_to(ROOT).with_suffix("")
        if rel.parts[0] == "config":
            continue
        classes = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.bases
                   and _takes_error_code(n)]
        if not classes:
            continue
        module = importlib.import_module("samsa." + ".".join(rel.parts))
        for node in classes:
            cls = getattr(module, node.name)
            if issubclass(cls, BaseException) and not issubclass(cls, KafkaError):
                found.append(f"{_where(path, node)} {node.name}")
    assert not found, found


def _assigned_from_outside(attr: str) -> Iterator[tuple[Path, str]]:
    """(module, `x.<attr>`) for every assignment to an attribute `attr` of another object
    than `self`."""
    for path, tree in _modules():
        for node in ast.walk(tree):
            targets = (node.targets if isinstance(node, ast.Assign)
                       else [node.target] if isinstance(node, ast.AnnAssign | ast.AugAssign)
                       else [])
            for t in targets:
                if (isinstance(t, ast.Attribute) and t.attr == attr
                        and not (isinstance(t.value, ast.Name) and t.value.id == "self")):
                    yield path, f"{_where(path, node)} {ast.unparse(t)}"


def test_only_partition_replaces_a_partitions_log() -> None:
    """`x.log = ...` outside the object itself: a second writer of the Partition's log."""
    found = [where for _path, where in _assigned_from_outside("log")]
    assert not found, found


def test_only_partition_reconfigures_a_log() -> None:
    """A log's config changes through `Partition.reconfigure` alone (the Log sets its own at
    construction)."""
    partition = ROOT / "broker" / "replication" / "partition.py"
    found = [where for path, where in _assigned_from_outside("config") if path != partition]
    assert not found, found
