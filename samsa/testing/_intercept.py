"""Request intercepts of the embedded broker: a rule names an API (and optionally which of its
requests, by a predicate) and what the broker does instead of serving it: answer an error,
answer what a function builds, wait first, or drop the connection.

An error answer mirrors the request as Kafka's `getErrorResponse` does: every topic, partition,
group or key the request names is in the answer with the error, and so is the top-level error
code where the response has one; ids, offsets and epochs are -1.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from samsa.protocol.codec import FieldPlan, absent_value, plans, reader, request_type, response_type
from samsa.protocol.encoder import encode_response
from samsa.protocol.errors import ErrorCode
from samsa.protocol.framing import (
    API_VERSIONS_KEY,
    frame_parts,
    peek_key_version,
    read_request_header,
    response_header,
)


@dataclasses.dataclass(frozen=True, slots=True)
class Intercepted:
    """A request an intercept looks at: its API, version, client id and decoded body (kio's
    request class of that version)."""

    api_key: int
    version: int
    client_id: str | None
    request: Any


Answer = Callable[[Intercepted], Mapping[str, Any]]


class Intercept:
    """One rule of `EmbeddedBroker.intercept`. `hits` counts the requests it took."""

    def __init__(self, api_key: int, when: Callable[[Intercepted], bool] | None,
                 error: ErrorCode | int | None, delay: float, drop: bool,
                 answer: Answer | None, times: int | None) -> None:
        if error is not None and answer is not None:
            raise ValueError("an intercept answers an error or what `answer` builds, not both")
        if drop and (error is not None or answer is not None):
            raise ValueError("a dropped connection gets no answer")
        self.api_key = api_key
        self.when = when
        self.error = None if error is None else ErrorCode(int(error))
        self.delay = delay
        self.drop = drop
        self.answer = answer
        self.times = times
        self.hits = 0
        self._lock = threading.Lock()
        self.removed = False

    def take(self, req: Intercepted) -> bool:
        """Does this rule take `req` (and count it)? Called on the broker's thread."""
        if self.removed or req.api_key != self.api_key:
            return False
        if self.when is not None and not self.when(req):
            return False
        with self._lock:
            if self.times is not None and self.hits >= self.times:
                return False
            self.hits += 1
            return True

    def remove(self) -> None:
        """The broker serves these requests again."""
        self.removed = True

    def __repr__(self) -> str:
        action = ("drop" if self.drop else f"error {self.error.name}" if self.error is not None
                  else "answer" if self.answer is not None else "pass")
        return (f"<Intercept api {self.api_key} {action} delay={self.delay}s hits={self.hits}"
                f"{'' if self.times is None else f'/{self.times}'}>")


Dispatch = Callable[[Any, Any], Awaitable[Any]]


class InterceptingDispatch:
    """The broker's dispatcher with the intercept rules in front of it."""

    def __init__(self, inner: Dispatch, rules: Sequence[Intercept],
                 close: Callable[[str], BaseException]) -> None:
        self.inner = inner
        self.rules = rules  # replaced, never mutated, by the test's thread
        self._close = close  # makes the dispatch layer's "close this connection" signal

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)  # registry, services: the broker's dispatcher's

    async def __call__(self, raw: Any, conn: Any) -> Any:
        taken = self._taken(raw, conn)
        if taken is None:
            return await self.inner(raw, conn)
        rule, req, correlation_id = taken
        if rule.delay > 0:
            await asyncio.sleep(rule.delay)
        if rule.drop:
            raise self._close(f"samsa.testing intercept: connection dropped at api "
                              f"{req.api_key}")
        if rule.error is not None:
            body = error_answer(req.api_key, req.version, req.request, rule.error)
        elif rule.answer is not None:
            body = dict(rule.answer(req))
        else:  # a delay alone: served, late
            return await self.inner(raw, conn)
        resp_type = response_type(req.api_key, req.version)
        parts, _ = encode_response(resp_type, body)
        flexible = _flexible(resp_type) and req.api_key != API_VERSIONS_KEY
        return frame_parts([response_header(correlation_id, flexible), *parts])

    def _taken(self, raw: Any, conn: Any) -> tuple[Intercept, Intercepted, int] | None:
        """The rule that takes this request, the request and its correlation id; None: the
        broker serves it as usual."""
        rules = self.rules
        auth = getattr(conn, "authenticator", None)
        if not rules or (auth is not None and not auth.complete and auth.raw_tokens):
            return None  # a bare SASL token, not a request
        api_key, version, correlation_id = peek_key_version(raw)
        if not any(r.api_key == api_key and not r.removed for r in rules):
            return None
        req = _decode(raw, api_key, version)
        if req is None:  # not readable: the broker's own answer (it closes the connection)
            return None
        rule = next((r for r in rules if r.take(req)), None)
        return None if rule is None else (rule, req, correlation_id)


def _flexible(entity: type) -> bool:
    return getattr(entity, "__flexible__", False) is True


def _decode(raw: Any, api_key: int, version: int) -> Intercepted | None:
    try:
        req_type = request_type(api_key, version)
        header, offset = read_request_header(raw, _flexible(req_type))
        request, _ = reader(req_type)(bytes(raw), offset)
    except Exception:
        return None
    return Intercepted(api_key, version, header.client_id, request)


# ---- error answers ------------------------------------------------------------------------

# A response field's name -> the names the request calls the same thing.
_ALIASES: dict[str, tuple[str, ...]] = {
    "partition_index": ("partition", "index", "partition_id"),
    "partition": ("partition_index", "index"),
    "partition_id": ("partition_index", "partition"),
    "index": ("partition_index", "partition"),
    "name": ("topic", "topic_name"),
    "topic": ("name", "topic_name"),
    "topic_name": ("name", "topic"),
    "group_id": ("key", "name"),
    "key": ("group_id",),
    "user": ("name",),
}
# Where a request lists bare keys (strings or partition numbers) and the response a struct per key.
_KEY_FIELDS = ("key", "group_id", "transactional_id", "partition_index", "partition",
               "partition_id", "name", "topic", "user")
_MINUS_ONE = ("offset", "epoch", "_id", "leader", "watermark", "timestamp", "time", "node",
              "port", "generation", "lag", "size", "count", "bytes", "iterations")


def error_answer(api_key: int, version: int, request: Any, error: ErrorCode) -> dict[str, Any]:
    """The response of `version` answering `request` with `error` everywhere it can."""
    return _mirror(response_type(api_key, version), request, error)


def _mirror(entity: type, source: Any, error: ErrorCode) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for plan in plans(entity).values():
        out[plan.name] = _field(plan, source, error)
    return out


def _field(plan: FieldPlan, source: Any, error: ErrorCode) -> Any:
    if plan.kafka_type == "error_code":
        return error
    if plan.name.endswith("error_message"):
        return f"{error.name} (injected by a samsa.testing intercept)"
    if plan.nested is not None and plan.is_array:
        return _mirror_list(plan, source, error)
    if plan.nested is not None:
        inner = _value(source, plan.name)
        return _mirror(plan.nested, inner if dataclasses.is_dataclass(inner) else None, error)
    if plan.is_array:
        return []
    copied = _value(source, plan.name, *_ALIASES.get(plan.name, ()))
    if copied is not None and not isinstance(copied, (tuple, list)) and (
            not dataclasses.is_dataclass(copied)):
        return copied
    return _default(plan)


def _mirror_list(plan: FieldPlan, source: Any, error: ErrorCode) -> list[dict[str, Any]]:
    assert plan.nested is not None
    items = _matching_items(plan, source)
    out = []
    for item in items:
        if dataclasses.is_dataclass(item):
            out.append(_mirror(plan.nested, item, error))
        else:  # a bare key: it goes in the struct's key field
            entry = _mirror(plan.nested, None, error)
            key = next((k for k in _KEY_FIELDS if k in entry), None)
            if key is not None:
                entry[key] = item
            out.append(entry)
    return out


def _matching_items(plan: FieldPlan, source: Any) -> Sequence[Any]:
    """The request's list that this response list answers: the same name, else the list whose
    entries share the most fields with the response's entries (bare keys count as one)."""
    if source is None or not dataclasses.is_dataclass(source):
        return []
    assert plan.nested is not None
    wanted = set(plans(plan.nested))
    wanted |= {a for name in list(wanted) for a in _ALIASES.get(name, ())}
    best: tuple[int, Sequence[Any]] = (0, [])
    for name, sp in plans(type(source)).items():  # type: ignore[arg-type]
        value = getattr(source, name, None)
        if not sp.is_array or value is None:
            continue
        if name == plan.name:
            return list(value)
        if sp.nested is not None:
            score = len(wanted & set(plans(sp.nested)))
        else:
            score = 1 if any(k in wanted for k in _KEY_FIELDS) else 0
        if score > best[0]:
            best = (score, list(value))
    return best[1]


def _value(source: Any, *names: str) -> Any:
    if source is None:
        return None
    for name in names:
        if hasattr(source, name):
            return getattr(source, name)
    return None


def _default(plan: FieldPlan) -> Any:
    t = plan.kafka_type
    if t.startswith(("int", "timedelta", "datetime")):
        if plan.name.startswith("throttle"):
            return 0
        return -1 if any(s in plan.name for s in _MINUS_ONE) else 0
    if t == "string":
        return ""
    if t == "records":
        return b""
    if t == "bytes":
        return b""
    return absent_value(plan)
