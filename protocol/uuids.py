"""Kafka's Uuid: its text form, and fresh ones drawn under Kafka's rules.

Kafka writes a Uuid as the URL-safe base64 of its 16 bytes without padding (22 characters).
`Uuid.randomUuid()` never returns the reserved ids (zero and the metadata topic's 1), and
since 4.4 (KAFKA-20072) none whose text contains '-' (4.3 refused only a leading one): an id
starting with '-' reads as an option on a command line (`kafka-storage format -t -0_w…`,
`kafka-topics --topic-id -…`), and Kafka's protocol guide asks that member ids have none.
Every id Samsa makes where Kafka makes a Uuid (topic, cluster, KIP-848 member, token and
client instance ids) is drawn here; a classic member id stays `clientId-<java.util.UUID>`.
"""

from __future__ import annotations

import base64
import uuid

ZERO_UUID = uuid.UUID(int=0)
METADATA_TOPIC_ID = uuid.UUID(int=1)
RESERVED = frozenset({ZERO_UUID, METADATA_TOPIC_ID})


def kafka_uuid_string(u: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(u.bytes).rstrip(b"=").decode()


def parse_kafka_uuid(text: str) -> uuid.UUID:
    """Kafka's Uuid.fromString; ValueError (binascii.Error is one) if it is not 16 bytes."""
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if len(raw) != 16:
        raise ValueError(f"not a Kafka Uuid: {text!r}")
    return uuid.UUID(bytes=raw)


def random_kafka_uuid() -> uuid.UUID:
    """Kafka's Uuid.randomUuid: random, not reserved, no '-' in its text form."""
    while True:
        u = uuid.uuid4()
        if u not in RESERVED and "-" not in kafka_uuid_string(u):
            return u


def random_kafka_uuid_string() -> str:
    """The text of a fresh Uuid: cluster ids, member ids, token ids."""
    return kafka_uuid_string(random_kafka_uuid())
