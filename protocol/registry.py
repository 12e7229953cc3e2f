"""API registry: api key → supported version range → handler.

`min_version`/`max_version` are what the broker accepts. `advertised_min` exists for Produce:
Kafka 4 advertises Produce v0 (librdkafka checks it before enabling compression) while it only
accepts v3+ (KAFKA-18659). `advertised=False` serves an API without listing it in
ApiVersions: ControlledShutdown, which only brokers send one another (Kafka 4 lists no such API).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeAlias, TypeVar

Ctx = TypeVar("Ctx")
Handler: TypeAlias = Callable[[Ctx, Any], Awaitable[dict[str, Any] | None]]


@dataclass(frozen=True, slots=True)
class ApiSpec(Generic[Ctx]):
    key: int
    name: str
    min_version: int
    max_version: int
    handler: Handler[Ctx]
    advertised_min: int
    advertised: bool = True

    def accepts(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


class ApiRegistry(Generic[Ctx]):
    def __init__(self) -> None:
        self._apis: dict[int, ApiSpec[Ctx]] = {}

    def register(
        self,
        key: int,
        name: str,
        versions: tuple[int, int],
        handler: Handler[Ctx],
        *,
        advertised_min: int | None = None,
        advertised: bool = True,
    ) -> None:
        lo, hi = versions
        self._apis[key] = ApiSpec(
            key, name, lo, hi, handler, lo if advertised_min is None else advertised_min,
            advertised,
        )

    def get(self, key: int) -> ApiSpec[Ctx] | None:
        return self._apis.get(key)

    def all(self) -> list[ApiSpec[Ctx]]:
        return sorted(self._apis.values(), key=lambda s: s.key)
