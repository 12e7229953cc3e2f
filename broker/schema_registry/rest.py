"""Confluent Schema Registry's v1 REST API over aiohttp: the routes map to Registry's
operations; answers and errors are JSON with the registry's content type."""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from . import errors
from .auth import BasicAuth
from .formats import TYPES
from .forward import Forwarder
from .registry import Registry

log = logging.getLogger(__name__)

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
Handler = Callable[[web.Request], Awaitable[Any]]


def _reply(status: int, body: Any) -> web.Response:
    return web.Response(status=status, text=json.dumps(body), content_type=CONTENT_TYPE)


def _route(handler: Handler, forwarder: Forwarder | None, auth: BasicAuth | None
           ) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def run(request: web.Request) -> web.Response:
        try:
            if auth is not None:
                auth.check(request.headers.get("Authorization"))
            result = await handler(request)
        except errors.RegistryError as exc:
            if exc.forwardable and forwarder is not None:
                return await _forward(forwarder, request)
            reply = _reply(exc.status, exc.body())
            if exc.status == 401:
                reply.headers["WWW-Authenticate"] = 'Basic realm="schema registry"'
            return reply
        except Exception as exc:  # the client gets Confluent's 500 rather than a bare one
            log.exception("schema registry: %s %s failed", request.method, request.path)
            return _reply(500, errors.store_error(repr(exc)).body())
        if isinstance(result, web.Response):
            return result
        return _reply(200, result)
    return run


async def _forward(forwarder: Forwarder, request: web.Request) -> web.Response:
    try:
        status, body, content_type = await forwarder.forward(request, await request.read())
    except errors.RegistryError as exc:
        return _reply(exc.status, exc.body())
    return web.Response(status=status, body=body, content_type=content_type)


def _flag(request: web.Request, name: str) -> bool:
    return request.query.get(name, "false").lower() == "true"


async def _body(request: web.Request) -> Any:
    if not request.can_read_body:
        return {}
    try:
        return json.loads(await request.text())
    except ValueError as exc:
        raise errors.RegistryError(400, 400, f"the body is not JSON: {exc}") from exc


def _schema_id(request: web.Request) -> int:
    try:
        return int(request.match_info["id"])
    except ValueError:
        raise errors.schema_not_found(f"Schema {request.match_info['id']} not found") from None


def build_app(registry: Registry, forwarder: Forwarder | None = None,
              auth: BasicAuth | None = None) -> web.Application:
    """The routes; each handler first brings the store up to date (the primary's load);
    on a broker that is not the primary, `forwarder` passes the requests on to it; `auth`,
    when given, checks each request's login first."""
    r = registry

    async def fresh() -> None:
        await r.log.catch_up()

    async def root(req: web.Request) -> Any:
        return {}

    async def schema_types(req: web.Request) -> Any:
        return list(TYPES)

    async def contexts(req: web.Request) -> Any:
        return ["."]  # the default context alone: contexts are not there

    async def schemas(req: web.Request) -> Any:
        """Every version of every subject (?subjectPrefix, ?deleted, ?latestOnly)."""
        await fresh()
        deleted, prefix = _flag(req, "deleted"), req.query.get("subjectPrefix", "")
        out = []
        for subject in r.subjects(deleted, prefix):
            versions = r.store.versions(subject, deleted)
            out += [r.shown(v, req.query.get("format"))
                    for v in (versions[-1:] if _flag(req, "latestOnly") else versions)]
        return out

    async def schema(req: web.Request) -> Any:
        await fresh()
        shown = r.shown(r.schema_by_id(_schema_id(req), req.query.get("subject")),
                        req.query.get("format"))
        return {k: v for k, v in shown.items() if k not in ("subject", "version")}

    async def schema_text(req: web.Request) -> Any:
        await fresh()
        shown = r.shown(r.schema_by_id(_schema_id(req)), req.query.get("format"))
        return web.Response(text=shown["schema"], content_type=CONTENT_TYPE)

    async def schema_subjects(req: web.Request) -> Any:
        await fresh()
        r.schema_by_id(_schema_id(req))
        holders = r.store.by_id(_schema_id(req))
        return sorted({v.subject for v in holders if _flag(req, "deleted") or not v.deleted})

    async def schema_versions(req: web.Request) -> Any:
        await fresh()
        r.schema_by_id(_schema_id(req))
        return [{"subject": v.subject, "version": v.version}
                for v in r.store.by_id(_schema_id(req)) if _flag(req, "deleted") or not v.deleted]

    async def subjects(req: web.Request) -> Any:
        await fresh()
        return r.subjects(_flag(req, "deleted"), req.query.get("subjectPrefix", ""))

    async def versions(req: web.Request) -> Any:
        await fresh()
        return r.version_numbers(req.match_info["subject"], _flag(req, "deleted"))

    async def register(req: web.Request) -> Any:
        return await r.register(req.match_info["subject"], await _body(req))

    async def lookup(req: web.Request) -> Any:
        await fresh()
        return r.lookup(req.match_info["subject"], await _body(req), _flag(req, "deleted"))

    async def delete_subject(req: web.Request) -> Any:
        return await r.delete_subject(req.match_info["subject"], _flag(req, "permanent"))

    async def version(req: web.Request) -> Any:
        await fresh()
        return r.shown(r.version(req.match_info["subject"], req.match_info["version"],
                                 _flag(req, "deleted")), req.query.get("format"))

    async def version_schema(req: web.Request) -> Any:
        await fresh()
        found = r.version(req.match_info["subject"], req.match_info["version"],
                          _flag(req, "deleted"))
        shown = r.shown(found, req.query.get("format"))
        return web.Response(text=shown["schema"], content_type=CONTENT_TYPE)

    async def referenced_by(req: web.Request) -> Any:
        await fresh()
        found = r.version(req.match_info["subject"], req.match_info["version"])
        return r.store.referenced_by(found.subject, found.version)

    async def delete_version(req: web.Request) -> Any:
        return await r.delete_version(req.match_info["subject"], req.match_info["version"],
                                      _flag(req, "permanent"))

    async def get_config(req: web.Request) -> Any:
        await fresh()
        return r.get_config(req.match_info.get("subject"), _flag(req, "defaultToGlobal"))

    async def set_config(req: web.Request) -> Any:
        await fresh()
        return await r.set_config(req.match_info.get("subject"), await _body(req))

    async def delete_config(req: web.Request) -> Any:
        await fresh()
        return await r.delete_config(req.match_info.get("subject"))

    async def get_mode(req: web.Request) -> Any:
        await fresh()
        return r.get_mode(req.match_info.get("subject"), _flag(req, "defaultToGlobal"))

    async def set_mode(req: web.Request) -> Any:
        await fresh()
        return await r.set_mode(req.match_info.get("subject"), await _body(req),
                                _flag(req, "force"))

    async def delete_mode(req: web.Request) -> Any:
        await fresh()
        return await r.delete_mode(req.match_info["subject"])

    async def compatibility(req: web.Request) -> Any:
        await fresh()
        result = r.test_compatibility(req.match_info["subject"], req.match_info.get("version"),
                                      await _body(req))
        if not _flag(req, "verbose"):
            result.pop("messages")
        return result

    app = web.Application()
    routes = [
        ("GET", "/", root),
        ("GET", "/contexts", contexts),
        ("GET", "/schemas", schemas),
        ("GET", "/schemas/types", schema_types),
        ("GET", "/schemas/ids/{id}", schema),
        ("GET", "/schemas/ids/{id}/schema", schema_text),
        ("GET", "/schemas/ids/{id}/subjects", schema_subjects),
        ("GET", "/schemas/ids/{id}/versions", schema_versions),
        ("GET", "/subjects", subjects),
        ("POST", "/subjects/{subject}", lookup),
        ("DELETE", "/subjects/{subject}", delete_subject),
        ("GET", "/subjects/{subject}/versions", versions),
        ("POST", "/subjects/{subject}/versions", register),
        ("GET", "/subjects/{subject}/versions/{version}", version),
        ("DELETE", "/subjects/{subject}/versions/{version}", delete_version),
        ("GET", "/subjects/{subject}/versions/{version}/schema", version_schema),
        ("GET", "/subjects/{subject}/versions/{version}/referencedby", referenced_by),
        ("GET", "/config", get_config),
        ("PUT", "/config", set_config),
        ("DELETE", "/config", delete_config),
        ("GET", "/config/{subject}", get_config),
        ("PUT", "/config/{subject}", set_config),
        ("DELETE", "/config/{subject}", delete_config),
        ("GET", "/mode", get_mode),
        ("PUT", "/mode", set_mode),
        ("GET", "/mode/{subject}", get_mode),
        ("PUT", "/mode/{subject}", set_mode),
        ("DELETE", "/mode/{subject}", delete_mode),
        ("POST", "/compatibility/subjects/{subject}/versions", compatibility),
        ("POST", "/compatibility/subjects/{subject}/versions/{version}", compatibility),
    ]
    for method, path, handler in routes:
        app.router.add_route(method, path, _route(handler, forwarder, auth))
    return app
