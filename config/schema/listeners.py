"""Listener addresses, the listener security protocol map, and per-listener property names."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from samsa.config.schema.property_def import SECURITY_PROTOCOLS
from samsa.config.schema.values import ConfigError


@dataclass(frozen=True)
class Listener:
    name: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"


_LISTENER_RE = re.compile(r"\s*([A-Za-z0-9_]+)://(\[[^\]]*\]|[^:/]*):(\d+)\s*")
LISTENER_PREFIX = re.compile(r"listener\.name\.([a-z0-9_]+)\.(.+)")
# What a listener may set per SASL mechanism (the JAAS configuration exists only so).
MECHANISM_PREFIX = re.compile(r"([a-z0-9-]+)\.(sasl\.jaas\.config|sasl\.server\.callback"
                               r"\.handler\.class|connections\.max\.reauth\.ms)")


def split_listener_key(key: str) -> tuple[str, str] | None:
    """(listener, property) of a per-listener name `listener.name.<listener>.<property>`
    (the property may be `<mechanism>.sasl.jaas.config` and the like), None for others."""
    m = LISTENER_PREFIX.fullmatch(key)
    return None if m is None else (m.group(1), m.group(2))


def parse_protocol_map(value: str) -> dict[str, str]:
    """listener.security.protocol.map: NAME:PROTOCOL,... (Kafka's
    SocketServerConfigs.LISTENER_SECURITY_PROTOCOL_MAP_CONFIG)."""
    key = "listener.security.protocol.map"
    out: dict[str, str] = {}
    for item in (s.strip() for s in value.split(",")):
        if not item:
            continue
        name, sep, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not re.fullmatch(r"[A-Z0-9_]+", name):
            raise ConfigError.invalid(key, value, "Expected NAME:PROTOCOL pairs")
        if protocol not in SECURITY_PROTOCOLS:
            raise ConfigError.invalid(key, value, f"No enum constant for {protocol!r}; "
                                      f"expected one of {', '.join(SECURITY_PROTOCOLS)}")
        if name in out:
            raise ConfigError.invalid(key, value, f"Duplicate listener name {name}")
        out[name] = protocol
    return out


def parse_listeners(
    key: str, value: str, protocols: Mapping[str, str], *, local_only: bool,
    advertised: bool = False,
) -> list[Listener]:
    """`listeners` / `advertised.listeners`: NAME://HOST:PORT,... with distinct names, each
    in the security protocol map (Kafka's CoreUtils.listenerListToEndPoints)."""
    out: list[Listener] = []
    for part in (s for s in value.split(",") if s.strip()):
        m = _LISTENER_RE.fullmatch(part)
        if not m:
            raise ConfigError.invalid(key, value, "Expected LISTENER://HOST:PORT")
        name, host, port = m.group(1).upper(), m.group(2), int(m.group(3))
        if name not in protocols:
            raise ConfigError.invalid(key, value, f"No security protocol defined for listener "
                                      f"{name} (see listener.security.protocol.map)")
        if port > 65535:
            raise ConfigError.invalid(key, value, "Port must be in [0, 65535]")
        if local_only:
            if host == "localhost":
                host = "127.0.0.1"
            if not re.fullmatch(r"127\.\d{1,3}\.\d{1,3}\.\d{1,3}", host):
                raise ConfigError.invalid(
                    key, value, "Samsa binds 127.0.0.0/8 addresses only, unless "
                    "advertised.listeners is set (e.g. in a container)")
        elif advertised and (not host or host == "0.0.0.0"):
            raise ConfigError.invalid(key, value, "An advertised host must be a real address")
        if any(li.name == name for li in out):
            raise ConfigError.invalid(key, value, f"Each listener must have a different name, "
                                      f"{name} is repeated")
        out.append(Listener(name, host, port, protocols[name]))
    if not out:
        raise ConfigError.invalid(key, value, "At least one listener is needed")
    return out
