"""How a handler module says which API it serves, beside the handler (as franz-go's kfake names
each file by its API and registers the key and versions at its top):

    @api(0, "Produce", (3, 13), advertised_min=0)
    async def handle_produce(ctx: RequestContext, request: ProduceRequest) -> ...:

The key, Kafka's name, the versions served and, where they differ, those advertised; where
it is not the default, the policy the dispatcher and the socket layer follow (quota kind, an
answer written at once, a raw lane: broker/network/policy.py).
broker/apis.py collects the declarations into the dispatch table; requests.py, the request
types of exactly those versions, is written from them (request_types.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..network.policy import DEFAULT_POLICY, ApiPolicy

F = TypeVar("F", bound=Callable[..., Any])

_ATTRIBUTE = "__kafka_api__"


@dataclass(frozen=True, slots=True)
class ApiDeclaration:
    key: int
    name: str  # Kafka's: the request types are named after it (requests.py: <name>Request)
    versions: tuple[int, int]  # the versions served, both included
    advertised_min: int | None = None  # ApiVersions' minimum when it is not the first served
    advertised: bool = True  # False: served, not listed in ApiVersions
    # The declared function makes the handler from the registry (ApiVersions lists the table).
    needs_registry: bool = False
    # Request types the handler tells versions apart by: alias -> (first, last) version.
    families: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    # Nested request structs its helpers take: alias -> the class's name in each version.
    structs: Mapping[str, str] = field(default_factory=dict)
    policy: ApiPolicy = DEFAULT_POLICY


def api(key: int, name: str, versions: tuple[int, int], *, advertised_min: int | None = None,
        advertised: bool = True, needs_registry: bool = False,
        families: Mapping[str, tuple[int, int]] | None = None,
        structs: Mapping[str, str] | None = None,
        policy: ApiPolicy = DEFAULT_POLICY) -> Callable[[F], F]:
    """Declare the function below as the handler of API `key` (see the module's docstring)."""
    declaration = ApiDeclaration(key, name, versions, advertised_min, advertised,
                                 needs_registry, dict(families or {}), dict(structs or {}),
                                 policy)

    def declare(handler: F) -> F:
        setattr(handler, _ATTRIBUTE, declaration)
        return handler

    return declare


def declaration_of(obj: object) -> ApiDeclaration | None:
    """The API `obj` was declared the handler of, if any."""
    found = getattr(obj, _ATTRIBUTE, None)
    return found if isinstance(found, ApiDeclaration) else None
