"""A Confluent-compatible schema registry served by the broker (issue 49): the v1 REST API on
its own HTTP listener (`schema.registry.listeners`), its state in the compacted `_schemas`
topic in Confluent's record format, written by the leader of its partition (the primary)."""

from __future__ import annotations

import logging
import ssl
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from samsa.config.schema import ConfigError
from samsa.coordinator.internal_log import InternalTopic
from samsa.coordinator.ports import InternalLogHost

from ..security.client import ClientSecurity
from ..security.tls import client_context, server_context
from .auth import BasicAuth, basic_header
from .forward import Forwarder
from .primary import PrimaryLocator
from .registry import Registry
from .store import SchemaStore
from .topic_log import TopicLog
from .validation import SchemaValidation

if TYPE_CHECKING:
    from aiohttp import web

    from ..cluster.metadata_store import MetadataStore

log = logging.getLogger(__name__)

# A write is acknowledged once two replicas have it (capped at the topic's replication factor,
# as for __transaction_state): a schema a client was given an id for survives the primary's loss.
MIN_ISR = 2


# The listener name whose ssl.* properties an https registry uses (listener.name.
# schema_registry.ssl.* override the broker's ssl.*).
TLS_LISTENER = "SCHEMA_REGISTRY"


def _address(url: str) -> tuple[str, int, bool]:
    """Host, port and whether it is https."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.port is None:
        raise ConfigError("schema.registry.listeners",
                          f"{url!r} is not an http://host:port or https://host:port URL")
    return parts.hostname, parts.port, parts.scheme == "https"


def _internal_login(config: Any) -> str | None:
    """The Authorization a broker sends its own requests to the primary with (validation's
    lookups): its inter-broker SASL user and password, when it has one."""
    security = ClientSecurity.from_config(config)
    if security.mechanism is None or not security.username:
        return None
    return basic_header(security.username, security.password)


class SchemaRegistry:
    """The registry of one broker: started and stopped with it."""

    def __init__(self, config: Any, host: InternalLogHost, metadata: MetadataStore) -> None:
        self.urls: list[str] = list(config["schema.registry.listeners"])
        self.addresses = [_address(url) for url in self.urls]
        tls = any(https for _, _, https in self.addresses)
        self.tls: ssl.SSLContext | None = server_context(config, TLS_LISTENER) if tls else None
        basic = config["schema.registry.authentication.method"] == "BASIC"
        self.auth = BasicAuth(config, metadata) if basic else None
        self.store = SchemaStore()
        self.topic = InternalTopic(
            host, config["schema.registry.topic"], 1,
            config["schema.registry.topic.replication.factor"],
            config["log.segment.bytes"], min_isr=MIN_ISR)
        self.registry = Registry(self.store, TopicLog(self.topic, self.store))
        self.forwarder = Forwarder(
            PrimaryLocator(metadata, self.topic.name, config.broker_id),
            client_tls=client_context(config, TLS_LISTENER) if tls else None,
            login=_internal_login(config) if basic else None)
        # the Produce handler's check of the topics with confluent.*.schema.validation
        self.validation = SchemaValidation(metadata, self)
        self._runner: web.AppRunner | None = None
        self.ports: list[int] = []  # the ports bound (a port 0 of the URL made concrete)

    async def start(self) -> None:
        # imported here: aiohttp takes a good part of a second to import, which a broker
        # without a registry should not pay
        from aiohttp import web

        from .rest import build_app

        runner = web.AppRunner(build_app(self.registry, self.forwarder, self.auth),
                               access_log=None)
        await runner.setup()
        self._runner = runner
        for host, port, https in self.addresses:
            site = web.TCPSite(runner, host, port, reuse_address=True,
                               ssl_context=self.tls if https else None)
            await site.start()
            server = site._server
            sockets = getattr(server, "sockets", None) or ()
            self.ports.append(sockets[0].getsockname()[1] if sockets else port)
            log.info("schema registry on %s://%s:%d", "https" if https else "http", host,
                     self.ports[-1])

    async def stop(self) -> None:
        await self.forwarder.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
