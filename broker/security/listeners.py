"""The broker's listeners as the socket server serves them (the inter-broker one first)."""

from __future__ import annotations

from typing import Any

from ..server import Endpoint
from .tls import server_context


def listener_endpoints(config: Any) -> list[Endpoint]:
    inter_broker = config.inter_broker_listener_name
    out = []
    for li in config.listeners:
        tls = server_context(config, li.name) if li.security_protocol.endswith("SSL") else None
        out.append(Endpoint(li.name, li.host, li.port, li.security_protocol, tls))
    out.sort(key=lambda e: e.name != inter_broker)
    return out
