"""Property validators: callables (key, parsed value) -> None that raise ConfigError."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from samsa.config.schema.values import ConfigError


@dataclass(frozen=True)
class Range:
    min: float | None = None
    max: float | None = None

    def __call__(self, key: str, value: Any) -> None:
        if value is None:
            return
        if self.min is not None and value < self.min:
            raise ConfigError.invalid(key, value, f"Value must be at least {self.min}")
        if self.max is not None and value > self.max:
            raise ConfigError.invalid(key, value, f"Value must be no more than {self.max}")

    def __str__(self) -> str:  # Kafka's Range.toString
        if self.min is None:
            return f"[...,{self.max}]"
        if self.max is None:
            return f"[{self.min},...]"
        return f"[{self.min},...,{self.max}]"


def at_least(n: float) -> Range:
    return Range(min=n)


def between(lo: float, hi: float) -> Range:
    return Range(min=lo, max=hi)


@dataclass(frozen=True)
class _Choices:
    choices: tuple[str, ...]

    def __str__(self) -> str:
        return f"[{', '.join(self.choices)}]"


@dataclass(frozen=True)
class ValidString(_Choices):
    def __call__(self, key: str, value: Any) -> None:
        if value is not None and value not in self.choices:
            choices = ", ".join(self.choices)
            raise ConfigError.invalid(key, value, f"String must be one of: {choices}")


@dataclass(frozen=True)
class ValidList(_Choices):
    """Each item of a list value is one of the choices."""

    def __call__(self, key: str, value: Any) -> None:
        for item in value or ():
            if item not in self.choices:
                raise ConfigError.invalid(
                    key, ",".join(value), f"String must be one of: {', '.join(self.choices)}"
                )


@dataclass(frozen=True)
class LoggerLevels:
    """`logger=LEVEL[,logger=LEVEL...]` (Samsa's per-module log levels)."""

    levels: tuple[str, ...]

    def __call__(self, key: str, value: Any) -> None:
        if value is None:
            return
        try:
            parse_logger_levels(value, self.levels)
        except ValueError as exc:
            raise ConfigError.invalid(key, value, str(exc)) from None

    def __str__(self) -> str:
        return f"logger=LEVEL,... with LEVEL in [{', '.join(self.levels)}]"


def parse_logger_levels(value: str, levels: tuple[str, ...]) -> dict[str, str]:
    """'samsa.coordinator.transaction=DEBUG, broker=WARN' -> {logger: level}."""
    out: dict[str, str] = {}
    for item in value.split(","):
        if not item.strip():
            continue
        name, sep, level = item.partition("=")
        name, level = name.strip(), level.strip().upper()
        if not sep or not name:
            raise ValueError(f"{item.strip()!r} is not logger=LEVEL")
        if level not in levels:
            raise ValueError(f"level of {name} must be one of: {', '.join(levels)}")
        out[name] = level
    return out


@dataclass(frozen=True)
class OneOfOrRange:
    """A special value or a range, e.g. gzip level -1 (library default) or 1..9."""

    special: int
    range: Range

    def __call__(self, key: str, value: Any) -> None:
        if value is not None and value != self.special:
            self.range(key, value)

    def __str__(self) -> str:
        return f"{self.range} or {self.special}"


Validator = Callable[[str, Any], None]
