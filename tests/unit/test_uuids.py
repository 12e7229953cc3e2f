"""Kafka's Uuid text form, and ids drawn under Kafka 4.4's rules."""

from __future__ import annotations

import uuid

import pytest

from samsa.coordinator.group.common import new_member_id
from samsa.protocol.uuids import (
    RESERVED,
    kafka_uuid_string,
    parse_kafka_uuid,
    random_kafka_uuid,
)


def test_the_text_form_is_kafkas() -> None:
    one = uuid.UUID("00000000-0000-0000-0000-000000000001")
    assert kafka_uuid_string(one) == "AAAAAAAAAAAAAAAAAAAAAQ"
    assert parse_kafka_uuid("AAAAAAAAAAAAAAAAAAAAAQ") == one
    u = uuid.uuid4()
    assert parse_kafka_uuid(kafka_uuid_string(u)) == u


@pytest.mark.parametrize("text", ["", "AAAA", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "not base64!"])
def test_text_that_is_not_16_bytes_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_kafka_uuid(text)


def test_drawn_ids_have_no_dash_and_are_not_reserved() -> None:
    # About 29 % of uniform ids have a '-' somewhere in their text; 2,000 draws would show it.
    drawn = [random_kafka_uuid() for _ in range(2000)]
    assert [u for u in drawn if "-" in kafka_uuid_string(u) or u in RESERVED] == []
    assert [m for m in (new_member_id() for _ in range(2000)) if "-" in m] == []
