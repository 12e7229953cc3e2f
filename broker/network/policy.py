"""What an API's registration tells the dispatcher and the socket layer, so that neither names an
API: how client quotas hold its requests, whether its answer is written at once, and a raw lane
for its usual request. A handler declares it beside its key and versions:

    @api(1, "Fetch", (4, 17), policy=ApiPolicy(FETCH_BYTES, answer_at_once=True))
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from .connection import Frame
from .quotas import REQUEST_TIME, RequestTime

if TYPE_CHECKING:
    from ..context import BrokerServices

# An answer's body (after the response header) and its non-zero error codes.
Written = tuple[bytes, list[int]]
# What a raw lane's `serve` gives for a request it serves: the answer written, or the
# handler's result to come (a dict the lane's writer or kio encodes; None: no answer).
Served = Written | Awaitable[dict[str, Any] | None]


class RawRequest(Protocol):
    """A request a raw lane read: the handler's request, and the header's client id."""

    @property
    def client_id(self) -> str | None: ...


@dataclass(frozen=True, slots=True)
class RawLane:
    """An API's usual request read, and its answer written, without kio (issue 47: thousands
    of small Produce requests a second). `read` gives the request in a frame (header and body)
    or None for one kio reads instead; `write` the answer's body at a version and its error
    codes, or None for one kio writes. The lane reads on connections without SASL or client
    quotas (the general path reads the others); its writer answers on all.

    `serve`, if set, handles a request the lane read (at its version) without a request
    context or the handler's coroutine when the request is of the usual kind it knows
    (Produce: one topic, one partition), as the handler would; None when it is not, with
    nothing done, and the handler has it."""

    read: Callable[[Frame], RawRequest | None]
    write: Callable[[int, Mapping[str, Any]], Written | None]
    serve: Callable[[BrokerServices, Any, int], Served | None] | None = None


@dataclass(frozen=True, slots=True)
class ApiPolicy:
    # The quota kind its requests are held to (quotas.py); None: exempt, as Kafka exempts the
    # cluster actions (KafkaApis' ExemptThrottle).
    quota: RequestTime | None = REQUEST_TIME
    # Its answer is written as soon as it is made even when more of the connection's requests
    # are read (they share the next write otherwise): Fetch, so that a long-poll woken by an
    # append reaches its consumer before the Produce answer that woke it is sent.
    answer_at_once: bool = False
    raw: RawLane | None = None


DEFAULT_POLICY = ApiPolicy()
THROTTLE_EXEMPT = ApiPolicy(quota=None)
