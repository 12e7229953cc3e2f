"""Listener properties: names, addresses and their security protocols."""

from __future__ import annotations

from samsa.config.schema.property_def import (
    DEFAULT_PROTOCOL_MAP,
    G_SECURITY,
    G_SOCKET,
    SECURITY_PROTOCOLS,
    PropertyDef,
    S,
    prop,
)
from samsa.config.schema.validators import ValidString

LISTENERS: list[PropertyDef] = [
    prop("listeners", S, "PLAINTEXT://127.0.0.1:9092", "Where the broker listens: a comma "
         "separated list of NAME://HOST:PORT, each name mapped to a security protocol by "
         "listener.security.protocol.map, with HOST in 127.0.0.0/8 (any host once "
         "advertised.listeners is set).", kafka="PLAINTEXT://:9092",
         group=G_SOCKET),
    prop("advertised.listeners", S, None, "Addresses given to clients in metadata, per listener "
         "name; a listener not named here is advertised as it listens.", group=G_SOCKET),
    prop("listener.security.protocol.map", S, DEFAULT_PROTOCOL_MAP, "NAME:PROTOCOL pairs: the "
         "security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL) of each listener name.",
         group=G_SOCKET),
    prop("inter.broker.listener.name", S, None, "The listener brokers use to reach each other; "
         "unset: the listener of security.inter.broker.protocol.", group=G_SOCKET),
    prop("security.inter.broker.protocol", S, "PLAINTEXT", "Security protocol between brokers "
         "when inter.broker.listener.name is unset: the brokers connect to the first listener "
         "of that protocol.", ValidString(SECURITY_PROTOCOLS), group=G_SOCKET),
    prop("sasl.mechanism.inter.broker.protocol", S, "PLAIN", "SASL mechanism brokers log in to "
         "each other with on a SASL inter-broker listener (one of the listener's "
         "sasl.enabled.mechanisms), with the username and password of the listener's "
         "listener.name.<listener>.<mechanism>.sasl.jaas.config.", kafka="GSSAPI",
         group=G_SECURITY),
]
