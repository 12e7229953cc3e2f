"""The dispatch table: which APIs and versions this broker serves, and their handlers, collected
from the handler modules' declarations (`@api(key, name, versions)` beside each handler,
broker/handlers/declare.py), with the policy each declares for the dispatcher and the socket
layer (broker/network/policy.py). To find a request's handler, look for its name: the module that
serves Produce declares `@api(0, "Produce", ...)`.

Each range is the versions this broker implements fully, within what Kafka's own message
schemas define (clients/src/main/resources/common/message/*.json, which kio is generated
from); an API appears here only when its handler exists. broker/handlers/requests.py, the kio
request classes of exactly these versions for the handlers' types, is written from the same
declarations (`python -m samsa.broker.handlers.request_types`).
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

from samsa.protocol.registry import ApiRegistry

from .context import RequestContext
from .handlers import (
    acls,
    api_versions,
    client_quotas,
    cluster,
    configs,
    consumer_groups,
    controlled_shutdown,
    delegation_tokens,
    describe_topic_partitions,
    elections,
    features,
    fetch,
    find_coordinator,
    groups,
    log_dirs,
    metadata,
    offsets,
    offsets_commit,
    produce,
    reassignments,
    sasl,
    scram_credentials,
    share_fetch,
    share_groups,
    share_offsets,
    share_state,
    streams_groups,
    telemetry,
    topics,
    transactions,
)
from .handlers.declare import ApiDeclaration, declaration_of
from .network.policy import ApiPolicy

# The modules whose declarations make the table (a new handler module is added here).
HANDLER_MODULES: tuple[ModuleType, ...] = (
    acls, api_versions, client_quotas, cluster, configs, consumer_groups, controlled_shutdown,
    delegation_tokens, describe_topic_partitions, elections, features, fetch, find_coordinator,
    groups, log_dirs, metadata, offsets, offsets_commit, produce, reassignments, sasl,
    scram_credentials, share_fetch, share_groups, share_offsets, share_state, streams_groups,
    telemetry, topics, transactions,
)


def declarations() -> list[tuple[ApiDeclaration, Callable[..., Any]]]:
    """Every declared API with the function declared for it, by API key."""
    found: dict[int, tuple[ApiDeclaration, Callable[..., Any]]] = {}
    for module in HANDLER_MODULES:
        for obj in vars(module).values():
            declared = declaration_of(obj)
            if declared is None or getattr(obj, "__module__", None) != module.__name__:
                continue  # not a handler, or another module's imported here
            if declared.key in found:
                raise ValueError(f"API {declared.key} is declared twice: {declared.name} in "
                                 f"{module.__name__} and {found[declared.key][0].name}")
            found[declared.key] = (declared, obj)
    return [found[key] for key in sorted(found)]


def policies() -> dict[int, ApiPolicy]:
    """What each API's registration tells the dispatcher and the socket layer, by API key."""
    return {declared.key: declared.policy for declared, _ in declarations()}


def build_registry() -> ApiRegistry[RequestContext]:
    r = ApiRegistry[RequestContext]()
    for declared, function in declarations():
        handler = function(r) if declared.needs_registry else function
        r.register(declared.key, declared.name, declared.versions, handler,
                   advertised_min=declared.advertised_min, advertised=declared.advertised)
    return r
