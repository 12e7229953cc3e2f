"""The handlers' contracts: the request types they declare match the dispatch table, every
handler takes the typed RequestContext, and error codes are ErrorCode members, not numbers."""

from __future__ import annotations

import ast
import inspect
import types
import typing
from pathlib import Path

import pytest

from samsa.broker.apis import build_registry
from samsa.broker.handlers import requests
from samsa.protocol.codec import request_type
from samsa.protocol.errors import ErrorCode

SPECS = build_registry().all()
HANDLERS = Path(__file__).resolve().parents[2] / "broker" / "handlers"


def _members(alias: object) -> set[type]:
    return set(typing.get_args(alias)) if isinstance(alias, types.UnionType) else {alias}


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_request_union_is_the_registered_versions(spec):
    alias = getattr(requests, f"{spec.name}Request")
    registered = {request_type(spec.key, v) for v in range(spec.min_version, spec.max_version + 1)}
    assert _members(alias) == registered


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_handler_takes_request_context_and_its_request_type(spec):
    params = list(inspect.signature(spec.handler).parameters.values())
    assert [p.name for p in params] == ["ctx", "request"]
    assert params[0].annotation == "RequestContext"
    assert params[1].annotation == f"{spec.name}Request"


@pytest.mark.parametrize(
    ("family", "api"),
    [
        ("DeleteTopicsRequestByName", "DeleteTopicsRequest"),
        ("FindCoordinatorRequestBatched", "FindCoordinatorRequest"),
        ("LeaveGroupRequestBatched", "LeaveGroupRequest"),
        ("OffsetFetchRequestBatched", "OffsetFetchRequest"),
    ],
)
def test_version_families_are_part_of_their_api(family, api):
    assert _members(getattr(requests, family)) < _members(getattr(requests, api))


@pytest.mark.parametrize("path", sorted(HANDLERS.glob("*.py")), ids=lambda p: p.name)
def test_no_module_local_error_codes(path):
    """`NOT_LEADER_OR_FOLLOWER = 6` style constants belong in protocol/errors.py (ErrorCode)."""
    names = {m.name.upper() for m in ErrorCode}
    tree = ast.parse(path.read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    assert target.id not in names, f"{path.name}: {target.id} = {node.value.value}"


@pytest.mark.parametrize("path", sorted(HANDLERS.glob("*.py")), ids=lambda p: p.name)
def test_no_numeric_error_codes_in_responses(path):
    """A response's "error_code" is an ErrorCode member (or a code computed elsewhere)."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and str(key.value).endswith("error_code"):
                    assert not isinstance(value, ast.Constant), f"{path.name}:{node.lineno}"
        if isinstance(node, ast.keyword) and (node.arg or "").endswith("error_code"):
            assert not isinstance(node.value, ast.Constant), f"{path.name}:{node.lineno}"
