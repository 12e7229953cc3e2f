"""The JSON Schema compatibility rules (Confluent's content models): a reader reads what a
writer wrote when it accepts every document the writer's schema accepts."""

from __future__ import annotations

import json
from typing import Any

import pytest

from samsa.broker.schema_registry.errors import RegistryError
from samsa.broker.schema_registry.formats import JSON, parse


def kinds(reader: Any, writer: Any) -> list[str]:
    found = parse(JSON, json.dumps(reader)).read_errors(parse(JSON, json.dumps(writer)))
    return [e.split(" at ")[0] for e in found]


def obj(props: dict[str, Any], *, required: tuple[str, ...] = (), extra: Any = None
        ) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        out["required"] = list(required)
    if extra is not None:
        out["additionalProperties"] = extra
    return out


NAME = {"name": {"type": "string"}}
AGE = {"age": {"type": "integer"}}


def test_a_property_added_to_a_closed_model_is_compatible() -> None:
    assert kinds(obj(NAME | AGE, extra=False), obj(NAME, extra=False)) == []


def test_a_property_added_to_an_open_model_is_not() -> None:
    """The old schema let any "age" through (an open model): the new one cannot read it."""
    assert kinds(obj(NAME | AGE), obj(NAME)) == ["PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL"]


def test_a_property_removed_from_an_open_model_is_compatible() -> None:
    assert kinds(obj(NAME), obj(NAME | AGE)) == []


def test_a_property_removed_from_a_closed_model_is_not() -> None:
    assert kinds(obj(NAME, extra=False), obj(NAME | AGE, extra=False)) == [
        "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL"]


def test_a_partially_open_model_covers_what_its_additional_properties_allow() -> None:
    assert kinds(obj(NAME, extra={"type": "integer"}), obj(NAME | AGE)) == []
    assert kinds(obj(AGE, extra={"type": "integer"}), obj(NAME | AGE)) == [
        "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"]


def test_a_new_required_property_is_not_compatible_unless_it_has_a_default() -> None:
    closed = obj(NAME, extra=False)
    assert kinds(obj(NAME | AGE, required=("age",), extra=False), closed) == [
        "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL"]
    with_default = {"age": {"type": "integer", "default": 0}}
    assert kinds(obj(NAME | with_default, required=("age",), extra=False), closed) == []


def test_closing_an_open_model_is_not_compatible_opening_it_is() -> None:
    assert kinds(obj(NAME, extra=False), obj(NAME)) == ["ADDITIONAL_PROPERTIES_REMOVED"]
    assert kinds(obj(NAME), obj(NAME, extra=False)) == []


@pytest.mark.parametrize("reader,writer,ok", [
    ("number", "integer", True),   # every integer is a number
    ("integer", "number", False),
    ("string", "integer", False),
    (["string", "null"], "string", True),
    ("string", ["string", "null"], False),
])
def test_type_changes(reader: Any, writer: Any, ok: bool) -> None:
    assert (kinds({"type": reader}, {"type": writer}) == []) is ok


def test_enum_values_may_be_added_not_removed() -> None:
    small, big = {"enum": ["a", "b"]}, {"enum": ["a", "b", "c"]}
    assert kinds(big, small) == []
    assert kinds(small, big) == ["ENUM_ARRAY_NARROWED"]


def test_array_items_are_checked() -> None:
    ints, nums = {"type": "array", "items": {"type": "integer"}}, \
        {"type": "array", "items": {"type": "number"}}
    assert kinds(nums, ints) == []
    assert kinds(ints, nums) == ["TYPE_CHANGED"]


def test_local_refs_are_followed() -> None:
    def with_def(t: str) -> dict[str, Any]:
        return {"definitions": {"n": {"type": t}}, "type": "object",
                "properties": {"v": {"$ref": "#/definitions/n"}}}
    assert kinds(with_def("number"), with_def("integer")) == []
    assert kinds(with_def("integer"), with_def("string")) == ["TYPE_CHANGED"]


def test_invalid_json_schemas_are_42201() -> None:
    for bad in ('{"type": 12}', "[1]", "nope", '{"required": "x"}'):
        with pytest.raises(RegistryError) as e:
            parse(JSON, bad)
        assert e.value.error_code == 42201
