"""The store rebuilt from `_schemas` records as Confluent's registry writes them (key fields in
its order, AVRO without schemaType, fields Samsa does not use, NOOP keys)."""

from __future__ import annotations

from typing import Any

from samsa.broker.schema_registry.store import SchemaStore


def replay(*records: tuple[dict[str, Any], dict[str, Any] | None]) -> SchemaStore:
    store = SchemaStore()
    for key, value in records:
        store.apply(key, value)
    return store


def schema_key(subject: str, version: int) -> dict[str, Any]:
    return {"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1}


def schema_value(subject: str, version: int, schema_id: int, **more: Any) -> dict[str, Any]:
    return {"subject": subject, "version": version, "id": schema_id, "schema": '"string"',
            "deleted": False, **more}


def test_confluents_records() -> None:
    store = replay(
        ({"keytype": "NOOP", "magic": 0}, None),
        (schema_key("a", 1), schema_value("a", 1, 1, metadata=None, ruleSet=None)),
        (schema_key("a", 2), schema_value("a", 2, 3, schemaType="JSON",
                                          references=[{"name": "r", "subject": "b",
                                                       "version": 1}])),
        ({"keytype": "CONFIG", "subject": None, "magic": 0}, {"compatibilityLevel": "FULL"}),
        ({"keytype": "CONFIG", "subject": "a", "magic": 0}, {"compatibilityLevel": "NONE"}),
        ({"keytype": "MODE", "subject": None, "magic": 0}, {"mode": "READONLY"}),
    )
    assert [v.version for v in store.versions("a")] == [1, 2]
    assert store.versions("a")[1].schema_type == "JSON"
    assert store.versions("a")[1].references[0].subject == "b"
    assert store.max_id == 3
    assert store.configs == {None: {"compatibilityLevel": "FULL"},
                             "a": {"compatibilityLevel": "NONE"}}
    assert store.modes == {None: "READONLY"}


def test_deletes() -> None:
    store = replay(
        (schema_key("a", 1), schema_value("a", 1, 1)),
        (schema_key("a", 2), schema_value("a", 2, 2)),
        (schema_key("a", 3), schema_value("a", 3, 3)),
        ({"keytype": "DELETE_SUBJECT", "subject": "a", "magic": 0}, {"subject": "a", "version": 2}),
        (schema_key("a", 3), None),  # a hard delete
        ({"keytype": "CONFIG", "subject": "a", "magic": 0}, {"compatibilityLevel": "NONE"}),
        ({"keytype": "CONFIG", "subject": "a", "magic": 0}, None),
    )
    assert store.versions("a") == []  # 1 and 2 soft-deleted, 3 gone
    assert [v.version for v in store.versions("a", deleted=True)] == [1, 2]
    assert store.subject_names() == [] and store.subject_names(deleted=True) == ["a"]
    assert [v.id for v in store.by_id(2)] == [2]  # a soft-deleted schema keeps its id
    assert store.max_id == 3  # ids are not given again
    assert store.configs == {}
    store.apply(schema_key("a", 1), None)
    store.apply(schema_key("a", 2), None)
    assert "a" not in store.subjects
