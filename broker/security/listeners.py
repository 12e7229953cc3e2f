"""The broker's listeners as the socket server serves them (the inter-broker one first)."""

from __future__ import annotations

from typing import Any

from samsa.config.schema import ConfigError

from ..network.server import Endpoint
from .oauthbearer import MECHANISM as OAUTHBEARER
from .oauthbearer import Validator, load_validator, unsecured_validator
from .sasl import SUPPORTED_MECHANISMS, SaslConfig, jaas_options, plain_users
from .scram import CredentialLookup, TokenLookup
from .tls import server_context


def listener_endpoints(config: Any, scram: CredentialLookup,
                       tokens: TokenLookup | None = None) -> list[Endpoint]:
    inter_broker = config.inter_broker_listener_name
    out = []
    for li in config.listeners:
        protocol = li.security_protocol
        tls = (server_context(config, li.name, protocol == "SASL_SSL")
               if protocol.endswith("SSL") else None)
        sasl = (sasl_config(config, li.name, scram, tokens) if protocol.startswith("SASL_")
                else None)
        out.append(Endpoint(li.name, li.host, li.port, protocol, tls, sasl))
    out.sort(key=lambda e: e.name != inter_broker)
    return out


def sasl_config(config: Any, listener: str, scram: CredentialLookup,
                tokens: TokenLookup | None = None) -> SaslConfig:
    opts = config.for_listener(listener)
    prefix = f"listener.name.{listener.lower()}."
    mechanisms = tuple(opts["sasl.enabled.mechanisms"])
    for m in mechanisms:
        if m not in SUPPORTED_MECHANISMS:
            raise ConfigError.invalid(
                "sasl.enabled.mechanisms", ",".join(mechanisms), f"Samsa supports "
                f"{', '.join(SUPPORTED_MECHANISMS)}; {m} is not")
    if not mechanisms:
        raise ConfigError.invalid("sasl.enabled.mechanisms", "", "A SASL listener needs at "
                                  "least one mechanism")
    users: dict[str, str] = {}
    if "PLAIN" in mechanisms:
        jaas = opts["plain.sasl.jaas.config"]
        if not jaas or "PlainLoginModule" not in jaas:
            raise ConfigError(f"{prefix}plain.sasl.jaas.config", f"Listener {listener} enables "
                              "SASL/PLAIN: set " + prefix + "plain.sasl.jaas.config to "
                              "org.apache.kafka.common.security.plain.PlainLoginModule "
                              'required user_<name>="<password>";')
        users = plain_users(jaas)
    max_reauth = {}
    for m in mechanisms:
        value = opts[f"{m.lower()}.connections.max.reauth.ms"]
        max_reauth[m] = int(value if value is not None else opts["connections.max.reauth.ms"])
    validator: Validator = unsecured_validator
    options: dict[str, str] = {}
    if OAUTHBEARER in mechanisms:
        options = jaas_options(opts["oauthbearer.sasl.jaas.config"])
        key = "oauthbearer.sasl.server.callback.handler.class"
        spec = opts[key] or opts["sasl.server.callback.handler.class"]
        if spec:
            try:
                validator = load_validator(spec)
            except ValueError as exc:
                raise ConfigError.invalid(opts.key(key), spec, str(exc)) from None
    return SaslConfig(listener, mechanisms, users, scram,
                      config["connection.failed.authentication.delay.ms"],
                      opts["sasl.server.max.receive.size"], max_reauth, validator, options,
                      tokens)
