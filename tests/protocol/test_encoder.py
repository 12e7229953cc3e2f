"""protocol/encoder.py writes exactly kio's bytes (`encode(build(entity, data))`) for every
response version the broker serves, from random handler-style dicts: missing fields (schema
defaults and zero values), nulls, nested entities and arrays, tagged fields, ints where kio
wants timedeltas/datetimes/ErrorCodes, and kio instances inside dicts. The broker runs with
SAMSA_CHECK_ENCODER=1 in the test suite too (tests/conftest.py), comparing every real response."""

from __future__ import annotations

import datetime
import random
import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from samsa.broker.apis import build_registry
from samsa.protocol.codec import build, encode, response_type
from samsa.protocol.encoder import LARGE_VALUE, encode_response
from samsa.protocol.kio_adapter import schema_fields

_SPECS = [(s.key, v) for s in build_registry().all()
          for v in range(s.min_version, s.max_version + 1)]  # fmt: skip
_CODES = [c.value for c in ErrorCode]
_INT_RANGES = {
    "int8": (-128, 127), "int16": (-(2**15), 2**15 - 1), "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1), "uint8": (0, 255), "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1), "uint64": (0, 2**64 - 1),
}  # fmt: skip


def _primitive(rng: random.Random, kafka_type: str, optional: bool) -> Any:
    if optional and rng.random() < 0.2:
        return None
    if kafka_type in _INT_RANGES:
        lo, hi = _INT_RANGES[kafka_type]
        small = rng.randint(0, min(hi, 300))
        return rng.choice([0, max(lo, -1), 1, lo, hi, rng.randint(lo, hi), small])
    if kafka_type == "error_code":
        return rng.choice([0, 0, *_CODES])
    if kafka_type == "bool":
        return rng.random() < 0.5
    if kafka_type == "float64":
        return rng.uniform(-1e9, 1e9)
    if kafka_type == "string":
        return rng.choice(["", "t", "topic-é", "x" * rng.randint(0, 300)])
    if kafka_type in ("bytes", "records"):
        value = rng.randbytes(rng.choice([0, 1, 200, LARGE_VALUE, LARGE_VALUE + 7]))
        return memoryview(value) if rng.random() < 0.3 else value  # Fetch reads are views
    if kafka_type == "uuid":
        return uuid.UUID(int=rng.getrandbits(128))
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        ms = rng.randint(0, 2**31 - 1)
        return datetime.timedelta(milliseconds=ms) if rng.random() < 0.3 else ms
    if kafka_type == "datetime_i64":
        ms = rng.randint(0, 2**40)
        return ms
    raise AssertionError(f"no generator for {kafka_type}")


def random_dict(rng: random.Random, entity: type, depth: int = 0) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for field in schema_fields(entity):
        if rng.random() < 0.25:
            continue  # left to its default or zero value
        if field.entity is not None:
            nested = field.entity
            if field.is_array:
                n = 0 if depth > 2 else rng.randint(0, 3)
                value: Any = [random_dict(rng, nested, depth + 1) for _ in range(n)]
                if rng.random() < 0.2:  # a kio instance in the list, as some handlers pass
                    value.append(build(nested, random_dict(rng, nested, depth + 1)))
            elif field.nullable and rng.random() < 0.3:
                value = None
            else:
                value = random_dict(rng, nested, depth + 1)
        elif field.is_array:
            value = [_primitive(rng, field.kafka_type, False)
                     for _ in range(rng.randint(0, 4))]  # fmt: skip
        else:
            value = _primitive(rng, field.kafka_type, field.nullable)
        data[field.name] = value
    return data


@pytest.mark.parametrize(("api_key", "version"), _SPECS, ids=[f"{k}v{v}" for k, v in _SPECS])
def test_same_bytes_as_kio(api_key: int, version: int) -> None:
    entity = response_type(api_key, version)
    rng = random.Random(api_key * 1000 + version)
    for _ in range(60):
        data = random_dict(rng, entity)
        try:
            expected = encode(build(entity, data))
        except (TypeError, ValueError):
            continue  # a value kio refuses (e.g. None in a non-nullable field)
        parts, _ = encode_response(entity, data)
        assert b"".join(parts) == expected, data


def test_empty_dict_is_every_default() -> None:
    for api_key, version in _SPECS:
        entity = response_type(api_key, version)
        parts, _ = encode_response(entity, {})
        assert b"".join(parts) == encode(build(entity, {})), (api_key, version)


def test_error_codes_are_collected() -> None:
    entity = response_type(0, 9)  # Produce: per-partition codes
    data = {"responses": [{"name": "t", "partition_responses": [
        {"index": 0, "error_code": 6}, {"index": 1, "error_code": 0},
        {"index": 2, "error_code": ErrorCode.not_enough_replicas}]}]}  # fmt: skip
    assert sorted(encode_response(entity, data)[1]) == [6, 19]
