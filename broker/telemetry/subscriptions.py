"""Client metrics subscriptions (KIP-714): the CLIENT_METRICS config resources, validated as
Kafka's ClientMetricsConfigs validates them, and which clients each one matches.

A subscription is a name and up to three configs: `metrics` (metric name prefixes, `*` for
all), `interval.ms` (the push interval, 100..3600000, default 5 minutes) and `match` (patterns
`key=regex` over the client's identity; none matches every client).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from samsa.protocol.errors import ErrorCode, KafkaError

METRICS = "metrics"
INTERVAL_MS = "interval.ms"
MATCH = "match"
NAMES = (METRICS, INTERVAL_MS, MATCH)
ALL_METRICS = "*"
INTERVAL_MS_DEFAULT = 5 * 60 * 1000
_MIN_INTERVAL_MS, _MAX_INTERVAL_MS = 100, 3_600_000

# What a match pattern may name: the client's identity as the broker knows it.
CLIENT_INSTANCE_ID = "client_instance_id"
CLIENT_ID = "client_id"
CLIENT_SOFTWARE_NAME = "client_software_name"
CLIENT_SOFTWARE_VERSION = "client_software_version"
CLIENT_SOURCE_ADDRESS = "client_source_address"
CLIENT_SOURCE_PORT = "client_source_port"
MATCH_KEYS = frozenset({CLIENT_INSTANCE_ID, CLIENT_ID, CLIENT_SOFTWARE_NAME,
                        CLIENT_SOFTWARE_VERSION, CLIENT_SOURCE_ADDRESS, CLIENT_SOURCE_PORT})


class SubscriptionError(KafkaError):
    """A subscription Kafka refuses, with Kafka's error code."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message, error_code)


@dataclass(frozen=True, slots=True)
class Subscription:
    name: str
    metrics: frozenset[str]
    interval_ms: int
    match: dict[str, re.Pattern[str]] = field(default_factory=dict)

    def matches(self, client: dict[str, str]) -> bool:
        """Every pattern matches the whole of the client's attribute (Java's matches())."""
        return all(p.fullmatch(client.get(key, "")) is not None for key, p in self.match.items())


def _list(value: str) -> list[str]:
    """A Kafka LIST config: comma-separated, each item trimmed, empty items dropped."""
    return [item.strip() for item in value.split(",") if item.strip()]


def parse_match(patterns: list[str]) -> dict[str, re.Pattern[str]]:
    """`key=regex` patterns by key, split at the first '=' (the regex may hold more);
    INVALID_CONFIG for a bad one."""
    out: dict[str, re.Pattern[str]] = {}
    for pattern in patterns:
        parts = pattern.split("=", 1)
        key = parts[0].strip()
        if len(parts) != 2 or key not in MATCH_KEYS:
            raise SubscriptionError(ErrorCode.invalid_config,
                                    f"Illegal client matching pattern: {pattern}")
        try:
            out[key] = re.compile(parts[1].strip())
        except re.error:
            raise SubscriptionError(ErrorCode.invalid_config,
                                    f"Illegal client matching pattern: {pattern}") from None
    return out


def _interval(value: str) -> int:
    try:
        interval = int(value.strip())
    except ValueError:
        raise SubscriptionError(
            ErrorCode.invalid_config,
            f"Invalid value {value} for configuration {INTERVAL_MS}: Not a number of type INT",
        ) from None
    if not _MIN_INTERVAL_MS <= interval <= _MAX_INTERVAL_MS:
        raise SubscriptionError(ErrorCode.invalid_request,
                                f"Invalid value {interval} for {INTERVAL_MS}, interval must be "
                                "between 100 and 3600000 (1 hour)")
    return interval


def validate(name: str, configs: dict[str, str]) -> None:
    """Kafka's ClientMetricsConfigs.validate: raises SubscriptionError."""
    if not name:
        raise SubscriptionError(ErrorCode.invalid_request, "Subscription name can't be empty")
    for key in configs:
        if key not in NAMES:
            raise SubscriptionError(ErrorCode.invalid_request,
                                    f"Unknown client metrics configuration: {key}")
    for key in (METRICS, MATCH):  # Kafka 4.2+ LIST configs (KIP-1161): no value twice
        items = _list(configs.get(key, ""))
        if len(set(items)) != len(items):
            raise SubscriptionError(ErrorCode.invalid_config,
                                    f"Configuration '{key}' values must not be duplicated.")
    if INTERVAL_MS in configs:
        _interval(configs[INTERVAL_MS])
    if MATCH in configs:
        parse_match(_list(configs[MATCH]))


def subscription(name: str, configs: dict[str, str]) -> Subscription:
    """A validated subscription's parsed form."""
    validate(name, configs)
    interval = configs.get(INTERVAL_MS)
    return Subscription(
        name,
        frozenset(_list(configs.get(METRICS, ""))),
        _interval(interval) if interval is not None else INTERVAL_MS_DEFAULT,
        parse_match(_list(configs.get(MATCH, ""))),
    )
