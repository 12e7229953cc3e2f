"""The web console: an aiohttp application whose pages ask the cluster over the Kafka protocol
(data.py, through the admin client) and answer server-rendered HTML (views.py).

Writes are POSTs only. In read-only mode a middleware refuses each with 403 before its handler
runs, so no request reaches the cluster. Each form carries a per-process token (a page from
another site cannot post). When the cluster is secured by SASL and the console was given no
credentials, a login form asks for them: the session (an in-memory table keyed by a random
cookie) carries them to the admin client of each request.
"""

from __future__ import annotations

import asyncio
import re
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from aiohttp import ClientError, ClientSession, ClientTimeout, web

from samsa.broker.admin import acls as admin_acls
from samsa.broker.admin import topics as admin_topics
from samsa.broker.admin import users as admin_users
from samsa.broker.admin.client import Admin, AdminError, KafkaRequestError, Settings
from samsa.protocol.errors import ErrorCode

from . import data, views
from .html import error_box, page

T = TypeVar("T")
COOKIE = "samsa_console"
SESSION_IDLE_S = 8 * 3600  # a login is forgotten after this long without a request
NOT_FOUND = frozenset({ErrorCode.unknown_topic_or_partition, ErrorCode.group_id_not_found,
                       ErrorCode.transactional_id_not_found, ErrorCode.unknown_topic_id})
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class Console:
    settings: Settings
    read_only: bool = False
    metrics_urls: list[str] = field(default_factory=list)
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    # a session's credentials, and when it was last used (time.monotonic())
    sessions: dict[str, tuple[Settings, float]] = field(default_factory=dict)
    session_idle_s: float = SESSION_IDLE_S

    @property
    def needs_login(self) -> bool:
        s = self.settings
        return s.sasl and (s.username is None or s.password is None)

    def session(self, token: str) -> Settings | None:
        """The session's credentials, forgotten after session_idle_s without a request."""
        found = self.sessions.get(token)
        now = time.monotonic()
        if found is None or now - found[1] > self.session_idle_s:
            self.sessions.pop(token, None)
            return None
        self.sessions[token] = (found[0], now)
        return found[0]


CONSOLE = web.AppKey("console", Console)


def console_of(request: web.Request) -> Console:
    return request.app[CONSOLE]


def session_settings(request: web.Request) -> Settings | None:
    c = console_of(request)
    if not c.needs_login:
        return c.settings
    return c.session(request.cookies.get(COOKIE, ""))


async def ask(request: web.Request, work: Callable[..., T], *args: Any) -> T:
    """work(admin, *args) in a thread, with an admin client of this session's settings."""
    settings = session_settings(request)
    assert settings is not None  # the login middleware let the request through

    def run() -> T:
        with Admin(settings) as admin:
            return work(admin, *args)

    return await asyncio.to_thread(run)


def render(request: web.Request, title: str, body: str, status: int = 200,
           refresh: bool = False) -> web.Response:
    """The page; `refresh`: it only shows, so it offers to reload itself."""
    c = console_of(request)
    settings = session_settings(request)
    user = settings.username if c.needs_login and settings else None
    return web.Response(text=page(title, body, read_only=c.read_only, user=user,
                                  refresh=refresh), content_type="text/html", status=status)


# ---- middlewares ---------------------------------------------------------------------------


@web.middleware
async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Login first (a secured cluster), then read-only and the form token for every write."""
    c = console_of(request)
    if request.path in ("/login", "/logout"):
        return await handler(request)
    if session_settings(request) is None:
        raise web.HTTPFound("/login")
    if request.method == "POST":
        if c.read_only:
            return render(request, "Refused", error_box(
                "The console is read-only: no change was sent to the cluster."), status=403)
        form = await request.post()
        if not secrets.compare_digest(str(form.get("csrf", "")), c.csrf):
            return render(request, "Refused", error_box("The form's token is missing or "
                                                        "stale: reload the page."), status=403)
    return await handler(request)


@web.middleware
async def admin_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """A Kafka error is shown on the page: 404 for what does not exist, else 502 (the cluster
    refused the request, or did not answer)."""
    try:
        return await handler(request)
    except AdminError as e:
        missing = isinstance(e, KafkaRequestError) and e.code in NOT_FOUND
        return render(request, "Error", error_box(str(e)), status=404 if missing else 502)


# ---- pages ---------------------------------------------------------------------------------


async def brokers_page(request: web.Request) -> web.Response:
    info = await ask(request, data.brokers)
    return render(request, "Brokers",
                  views.brokers(info, bool(console_of(request).metrics_urls)), refresh=True)


async def topics_page(request: web.Request) -> web.Response:
    c = console_of(request)
    rows = await ask(request, data.topics)
    return render(request, "Topics", views.topics(rows, c.read_only, c.csrf,
                                                  bool(c.metrics_urls)))


async def create_topic(request: web.Request) -> web.Response:
    form = await request.post()
    name = str(form.get("name", "")).strip()
    try:
        partitions = int(str(form.get("partitions") or 1))
        replication = int(str(form.get("replication_factor") or -1))
        configs = admin_topics.parse_configs(
            [c.strip() for c in str(form.get("configs", "")).split(",") if c.strip()])
    except ValueError as e:
        return render(request, "Topics", error_box(str(e)), status=400)
    created = await ask(request, admin_topics.create, name, partitions, replication, configs)
    await ask(request, data.await_created, name, created["partitions"])
    raise web.HTTPSeeOther(f"/topics/{name}")


async def topic_page(request: web.Request) -> web.Response:
    c = console_of(request)
    name = request.match_info["name"]
    found = await ask(request, data.topic, name)
    return render(request, f"Topic {name}", views.topic(found, c.read_only, c.csrf),
                  refresh=True)


async def delete_topic(request: web.Request) -> web.Response:
    await ask(request, admin_topics.delete, [request.match_info["name"]])
    raise web.HTTPSeeOther("/topics")


async def messages_page(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    q = request.query
    try:
        partition = int(q.get("partition", "0"))
        offset = int(q["offset"]) if q.get("offset") else None
        limit = max(1, min(int(q.get("limit", "20")), 500))
    except ValueError as e:
        return render(request, f"Messages of {name}", error_box(str(e)), status=400)
    fmt = q.get("format", "text") if q.get("format") in ("text", "json", "hex") else "text"
    committed = q.get("isolation") == "read_committed"
    found = await ask(request, data.messages, name, partition, offset, limit, committed)
    return render(request, f"Messages of {name}", views.messages(found, fmt, limit))


async def groups_page(request: web.Request) -> web.Response:
    return render(request, "Groups", views.groups(await ask(request, data.groups)),
                  refresh=True)


async def transactions_page(request: web.Request) -> web.Response:
    try:
        max_minutes = max(int(request.query.get("max_minutes", "15")), 0)
    except ValueError:
        max_minutes = 15

    def gather(admin: Admin) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        txns = data.transactions(admin)
        return txns, data.open_transactions(admin, txns, max_minutes)

    txns, open_txns = await ask(request, gather)
    return render(request, "Transactions", views.transactions(
        txns, open_txns, max_minutes, console_of(request).read_only), refresh=True)


def _abort_fields(source: Any) -> dict[str, str]:
    fields = {k: str(source.get(k, "")) for k in views.ABORT_FIELDS}
    for k in views.ABORT_FIELDS[1:]:
        if not re.fullmatch(r"-?\d+", fields[k]):
            raise web.HTTPBadRequest(text=f"{k} must be an integer")
    return fields


async def confirm_abort_page(request: web.Request) -> web.Response:
    c = console_of(request)
    if c.read_only:
        return render(request, "Refused", error_box(
            "The console is read-only: no change was sent to the cluster."), status=403)
    return render(request, "Abort a transaction",
                  views.confirm_abort(_abort_fields(request.query), c.csrf))


async def abort_transaction(request: web.Request) -> web.Response:
    f = _abort_fields(await request.post())
    await ask(request, data.abort, f["topic"], int(f["partition"]), int(f["start_offset"]))
    raise web.HTTPSeeOther("/transactions?aborted=" + f["producer_id"])


async def security_page(request: web.Request) -> web.Response:
    def gather(admin: Admin) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        return data.acls(admin), data.users(admin)

    c = console_of(request)
    acls, users = await ask(request, gather)
    return render(request, "ACLs & users", views.security(acls, users, c.read_only, c.csrf))


async def _form(request: web.Request, names: tuple[str, ...]) -> dict[str, str]:
    form = await request.post()
    return {k: str(form.get(k, "")).strip() for k in names}


async def create_acl(request: web.Request) -> web.Response:
    f = await _form(request, views.ACL_FIELDS)
    await ask(request, admin_acls.create, f["resource_type"], f["resource_name"] or None,
              f["pattern_type"], f["principal"], f["host"] or "*", [f["operation"]],
              f["permission"])
    raise web.HTTPSeeOther("/security")


async def delete_acl(request: web.Request) -> web.Response:
    f = await _form(request, views.ACL_FIELDS)
    await ask(request, admin_acls.delete, admin_acls.Filter(**f))
    raise web.HTTPSeeOther("/security")


async def set_scram(request: web.Request) -> web.Response:
    f = await _form(request, ("user", "password", "mechanism", "iterations"))
    if not f["iterations"].isdigit():
        return render(request, "ACLs & users", error_box("iterations: a number"), status=400)
    await ask(request, admin_users.set_scram, f["user"], [f["mechanism"]], f["password"],
              int(f["iterations"]))
    raise web.HTTPSeeOther("/security")


async def delete_scram(request: web.Request) -> web.Response:
    f = await _form(request, ("user", "mechanism"))
    await ask(request, admin_users.delete_scram, f["user"], [f["mechanism"]])
    raise web.HTTPSeeOther("/security")


# ---- login ---------------------------------------------------------------------------------


async def login_page(request: web.Request) -> web.Response:
    c = console_of(request)
    if not c.needs_login:
        raise web.HTTPFound("/")
    return render(request, "Log in", views.login(None, c.settings.mechanism))


async def login(request: web.Request) -> web.Response:
    c = console_of(request)
    if not c.needs_login:
        raise web.HTTPFound("/")
    form = await request.post()
    mechanism = str(form.get("mechanism", c.settings.mechanism))
    settings = Settings({**c.settings.props, "sasl.mechanism": mechanism,
                         "sasl.username": str(form.get("username", "")),
                         "sasl.password": str(form.get("password", ""))})

    def check_credentials() -> None:
        with Admin(settings) as admin:
            admin.metadata([])

    try:
        await asyncio.to_thread(check_credentials)
    except AdminError as e:
        return render(request, "Log in", views.login(str(e), mechanism), status=401)
    token = secrets.token_urlsafe(32)
    c.sessions[token] = (settings, time.monotonic())
    response = web.HTTPSeeOther("/")
    response.set_cookie(COOKIE, token, httponly=True, samesite="Strict")
    raise response


async def logout(request: web.Request) -> web.Response:
    console_of(request).sessions.pop(request.cookies.get(COOKIE, ""), None)
    response = web.HTTPSeeOther("/login")
    response.del_cookie(COOKIE)
    raise response


# ---- throughput ----------------------------------------------------------------------------

COUNTERS = {"bytes_in": "kafka_server_brokertopicmetrics_bytesinpersec_total",
            "bytes_out": "kafka_server_brokertopicmetrics_bytesoutpersec_total",
            "records_in": "kafka_server_brokertopicmetrics_messagesinpersec_total"}


def sum_counters(text: str) -> dict[str, Any]:
    """The Prometheus text's byte and record counters: summed over topics, and per topic."""
    totals: dict[str, Any] = dict.fromkeys(COUNTERS, 0.0)
    per_topic: dict[str, dict[str, float]] = {}
    names = {v: k for k, v in COUNTERS.items()}
    for line in text.splitlines():
        match = re.match(r'([a-z_]+)(?:\{(?:[^}]*\btopic="([^"]*)")?[^}]*\})?\s+(\S+)', line)
        if match and match[1] in names:
            key, value = names[match[1]], float(match[3])
            totals[key] += value
            if match[2] is not None:
                counts = per_topic.setdefault(match[2], dict.fromkeys(COUNTERS, 0.0))
                counts[key] += value
    return {**totals, "topics": per_topic}


async def throughput(request: web.Request) -> web.Response:
    """The counters of every configured /metrics URL, summed (the pages' scripts make rates
    of two answers)."""
    totals: dict[str, Any] = dict.fromkeys(COUNTERS, 0.0)
    per_topic: dict[str, dict[str, float]] = {}
    try:
        async with ClientSession(timeout=ClientTimeout(total=5)) as http:
            for url in console_of(request).metrics_urls:
                async with http.get(url) as resp:
                    found = sum_counters(await resp.text())
                for k in COUNTERS:
                    totals[k] += found[k]
                for topic, counts in found["topics"].items():
                    mine = per_topic.setdefault(topic, dict.fromkeys(COUNTERS, 0.0))
                    for k, v in counts.items():
                        mine[k] += v
    except (ClientError, TimeoutError, OSError) as e:
        return web.json_response({"error": str(e)})
    return web.json_response({**totals, "topics": per_topic, "time": time.time()})


# ---- the application -----------------------------------------------------------------------


def make_app(console: Console) -> web.Application:
    app = web.Application(middlewares=[admin_errors, guard])
    app[CONSOLE] = console
    app.add_routes([
        web.get("/", brokers_page), web.get("/topics", topics_page),
        web.post("/topics", create_topic), web.get("/topics/{name}", topic_page),
        web.post("/topics/{name}/delete", delete_topic),
        web.get("/topics/{name}/messages", messages_page), web.get("/groups", groups_page),
        web.get("/transactions", transactions_page),
        web.get("/transactions/abort", confirm_abort_page),
        web.post("/transactions/abort", abort_transaction),
        web.get("/security", security_page), web.post("/acls", create_acl),
        web.post("/acls/delete", delete_acl), web.post("/users", set_scram),
        web.post("/users/delete", delete_scram), web.get("/throughput", throughput),
        web.get("/login", login_page), web.post("/login", login), web.get("/logout", logout)])
    return app
