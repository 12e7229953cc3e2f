"""The broker as a client of other brokers (follower fetches, WriteTxnMarkers, forwarded
requests): it connects to their inter-broker listener (`inter.broker.listener.name`, or the
listener of `security.inter.broker.protocol`) with that listener's security, as Kafka's
brokers do:

* SSL / SASL_SSL: TLS verified against the listener's trust store
  (`ssl.endpoint.identification.algorithm=https`: the peer's certificate must name the host),
  presenting the listener's key store (for `ssl.client.auth=required`);
* SASL_PLAINTEXT / SASL_SSL: `sasl.mechanism.inter.broker.protocol`, with the broker's
  credentials from the listener's JAAS configuration
  (`listener.name.<listener>.<mechanism>.sasl.jaas.config`: `username` and `password` for
  PLAIN and SCRAM, the `unsecuredLogin*` options of an unsecured OAUTHBEARER token).

A session with a lifetime (KIP-368) is not re-authenticated: the connection is closed and
opened again before the lifetime ends.
"""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from samsa.config.schema import ConfigError
from samsa.protocol.errors import ErrorCode

from .oauthbearer import MECHANISM as OAUTHBEARER
from .oauthbearer import client_initial_response, unsecured_token
from .sasl import jaas_options
from .scram import MECHANISMS as SCRAM_MECHANISMS
from .scram import ScramClient, ScramError
from .tls import client_context

SASL_HANDSHAKE_KEY = 17
SASL_AUTHENTICATE_KEY = 36

# (api key, version, body) -> the decoded response, over the connection being set up
Exchange = Callable[[int, int, dict[str, Any]], Awaitable[Any]]


class AuthenticationError(Exception):
    """The other broker refused this broker's credentials (or the exchange went wrong)."""


@dataclass(frozen=True)
class ClientSecurity:
    listener: str
    security_protocol: str = "PLAINTEXT"
    tls: ssl.SSLContext | None = None
    check_hostname: bool = True
    mechanism: str | None = None  # SASL_*: the mechanism
    username: str = ""
    password: str = ""
    login_options: dict[str, str] = field(default_factory=dict)  # the JAAS options

    @classmethod
    def plaintext(cls) -> ClientSecurity:
        return cls("PLAINTEXT")

    @classmethod
    def from_config(cls, config: Any) -> ClientSecurity:
        listener = config.inter_broker_listener_name
        protocol = config.listener.security_protocol
        opts = config.for_listener(listener)
        tls = None
        if protocol.endswith("SSL"):
            tls = client_context(config, listener)
        if not protocol.startswith("SASL_"):
            return cls(listener, protocol, tls)
        mechanism = str(config["sasl.mechanism.inter.broker.protocol"])
        enabled = list(opts["sasl.enabled.mechanisms"])
        if mechanism not in enabled:
            raise ConfigError.invalid("sasl.mechanism.inter.broker.protocol", mechanism,
                                      "sasl.mechanism.inter.broker.protocol must be included in "
                                      f"sasl.enabled.mechanisms of listener {listener} when "
                                      "SASL is used for inter-broker communication")
        key = f"{mechanism.lower()}.sasl.jaas.config"
        options = jaas_options(opts[key])
        if mechanism != OAUTHBEARER and ("username" not in options
                                         or "password" not in options):
            raise ConfigError(opts.key(key), f"The inter-broker listener {listener} uses "
                              f"SASL/{mechanism}: its JAAS configuration {opts.key(key)} needs "
                              'the broker\'s username="..." password="..."')
        if mechanism == OAUTHBEARER and not any(k.startswith("unsecuredLoginStringClaim_sub")
                                                for k in options):
            raise ConfigError(opts.key(key), f"The inter-broker listener {listener} uses "
                              "SASL/OAUTHBEARER: its JAAS configuration needs "
                              'unsecuredLoginStringClaim_sub="<broker principal>"')
        return cls(listener, protocol, tls, True, mechanism, options.get("username", ""),
                   options.get("password", ""), options)

    async def authenticate(self, exchange: Exchange) -> int:
        """Run the SASL exchange on a new connection (SaslHandshake v1, then SaslAuthenticate
        v2); the session lifetime in ms (0: none). AuthenticationError if refused."""
        assert self.mechanism is not None
        r = await exchange(SASL_HANDSHAKE_KEY, 1, {"mechanism": self.mechanism})
        if r.error_code != ErrorCode.none:
            raise AuthenticationError(f"SASL handshake for {self.mechanism} failed: error "
                                      f"{r.error_code} (the broker offers {r.mechanisms})")
        lifetime = 0

        async def step(token: bytes) -> bytes:
            a = await exchange(SASL_AUTHENTICATE_KEY, 2, {"auth_bytes": token})
            if a.error_code != ErrorCode.none:
                raise AuthenticationError(f"SASL/{self.mechanism} authentication failed: "
                                          f"{a.error_message}")
            nonlocal lifetime
            lifetime = int(a.session_lifetime.total_seconds() * 1000)
            return bytes(a.auth_bytes)

        if self.mechanism == "PLAIN":
            await step(f"\0{self.username}\0{self.password}".encode())
        elif self.mechanism in SCRAM_MECHANISMS:
            client = ScramClient(self.mechanism, self.username, self.password)
            server_first = await step(client.first())
            try:
                server_final = await step(client.final(server_first))
                client.verify(server_final)
            except ScramError as exc:
                raise AuthenticationError(f"SCRAM exchange failed: {exc}") from None
        elif self.mechanism == OAUTHBEARER:
            answer = await step(client_initial_response(unsecured_token(self.login_options)))
            if answer:  # the JSON error: answer it with 0x01 to get the failure
                await step(b"\x01")
                raise AuthenticationError(f"OAUTHBEARER token refused: {answer!r}")
        else:
            raise AuthenticationError(f"unsupported mechanism {self.mechanism}")
        return lifetime
