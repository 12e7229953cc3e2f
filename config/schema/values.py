"""Configuration value types, sources and errors, and parsing and printing values as Kafka does."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator
from decimal import Decimal
from enum import IntEnum
from typing import Any

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1


class ConfigType(IntEnum):
    """DescribeConfigs v3+ ConfigType ids."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(IntEnum):
    """DescribeConfigs ConfigSource ids."""

    UNKNOWN = 0
    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    GROUP_CONFIG = 8  # a group's own override (Kafka 4's group configs)


class ConfigError(ValueError):
    """A bad configuration key or value; the message always names the key."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key

    @classmethod
    def invalid(cls, key: str, value: object, reason: str) -> ConfigError:
        # Same shape as Kafka's ConfigException(name, value, message).
        return cls(key, f"Invalid value {value!r} for configuration {key}: {reason}")

    @classmethod
    def unknown(cls, key: str, known: Iterator[str] | list[str]) -> ConfigError:
        msg = f"Unknown configuration '{key}'"
        close = difflib.get_close_matches(key, list(known), n=1)
        if close:
            msg += f" (did you mean '{close[0]}'?)"
        return cls(key, msg)


# ---------------------------------------------------------------------------------------------
# Parsing and printing values the way Kafka's ConfigDef does.

_INT_RE = re.compile(r"[+-]?\d+")
_INT_BOUNDS = {
    ConfigType.SHORT: (-(2**15), 2**15 - 1, "a 16-bit integer (short)"),
    ConfigType.INT: (-(2**31), INT_MAX, "a 32-bit integer (int)"),
    ConfigType.LONG: (-(2**63), LONG_MAX, "a 64-bit integer (long)"),
}


def parse_value(key: str, ctype: ConfigType, raw: object) -> Any:
    """Parse a string (from `--set`/AlterConfigs) or a YAML scalar into the property's type."""
    if raw is None:
        return None
    if ctype is ConfigType.BOOLEAN:
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and raw.strip().lower() in ("true", "false"):
            return raw.strip().lower() == "true"
        raise ConfigError.invalid(key, raw, "Expected value to be either true or false")
    if ctype in _INT_BOUNDS:
        lo, hi, what = _INT_BOUNDS[ctype]
        if isinstance(raw, int) and not isinstance(raw, bool):
            n = raw
        elif isinstance(raw, str) and _INT_RE.fullmatch(raw.strip()):
            n = int(raw.strip())
        else:
            raise ConfigError.invalid(key, raw, f"Expected value to be {what}")
        if not lo <= n <= hi:
            raise ConfigError.invalid(key, raw, f"Expected value to be {what}")
        return n
    if ctype is ConfigType.DOUBLE:
        if isinstance(raw, int | float) and not isinstance(raw, bool):
            return float(raw)
        if isinstance(raw, str):
            try:
                return float(raw.strip())
            except ValueError:
                pass
        raise ConfigError.invalid(key, raw, "Expected value to be a double")
    if ctype is ConfigType.LIST:
        if isinstance(raw, list | tuple):
            return [str(x).strip() for x in raw]
        if isinstance(raw, str):
            s = raw.strip()
            return [] if not s else [part.strip() for part in s.split(",")]
        raise ConfigError.invalid(key, raw, "Expected a comma separated list")
    # STRING: YAML may hand us a number or a bool for a string-typed property.
    if isinstance(raw, bool):
        return "true" if raw else "false"
    if isinstance(raw, str | int | float):
        return str(raw).strip()
    raise ConfigError.invalid(key, raw, "Expected value to be a string")


def java_double_str(x: float) -> str:
    """Double.toString: plain in [1e-3, 1e7), otherwise d.dddE<n>."""
    if x != x:
        return "NaN"
    if x in (float("inf"), float("-inf")):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0 or 1e-3 <= abs(x) < 1e7:
        s = repr(x)
        return s if ("." in s or "e" in s) else s + ".0"
    # Shortest round-trip digits (as Java prints them), re-laid out in Java's notation.
    _, digits, exp = Decimal(repr(abs(x))).normalize().as_tuple()
    assert isinstance(exp, int)
    ds = "".join(map(str, digits))
    sign = "-" if x < 0 else ""
    return f"{sign}{ds[0]}.{ds[1:] or '0'}E{len(ds) - 1 + exp}"


def value_to_string(ctype: ConfigType, value: Any) -> str | None:
    """ConfigDef.convertToString: how Kafka prints a parsed value in DescribeConfigs."""
    if value is None:
        return None
    if ctype is ConfigType.BOOLEAN:
        return "true" if value else "false"
    if ctype is ConfigType.LIST:
        return ",".join(value)
    if ctype is ConfigType.DOUBLE:
        return java_double_str(float(value))
    return str(value)
