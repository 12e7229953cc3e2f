"""The broker's own login to other brokers: its unsecured OAUTHBEARER token passes Kafka's
unsecured validator, and a SASL inter-broker listener without the broker's credentials, or
with a mechanism it does not enable, is refused at start-up."""

from __future__ import annotations

import pytest

from samsa.broker.security.client import ClientSecurity
from samsa.broker.security.oauthbearer import (
    OAuthBearerValidationError,
    unsecured_token,
    unsecured_validator,
)
from samsa.broker.security.sasl import jaas_options
from samsa.config import ConfigError
from samsa.config.loader import load_config

LOGIN = ('org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required '
         'unsecuredLoginStringClaim_sub="broker" unsecuredLoginListClaim_scope=",kafka,x" '
         'unsecuredLoginLifetimeSeconds=60 unsecuredValidatorRequiredScope="kafka";')


def test_broker_token_passes_the_unsecured_validator() -> None:
    options = jaas_options(LOGIN)
    assert options["unsecuredLoginLifetimeSeconds"] == "60"  # an unquoted value
    token = unsecured_validator(unsecured_token(options, now_ms=1_000_000), options,
                                now_ms=1_000_500)
    assert token.principal_name == "broker"
    assert token.scope == {"kafka", "x"}
    assert token.lifetime_ms == 1_060_000
    with pytest.raises(OAuthBearerValidationError, match="Expiration Time"):
        unsecured_validator(unsecured_token(options, now_ms=0), options, now_ms=61_000)


def _config(**settings: str) -> object:
    return load_config(None, {"listeners": "SASL_SSL://127.0.0.1:0",
                              "security.inter.broker.protocol": "SASL_SSL", **settings})


def test_sasl_inter_broker_listener_needs_credentials_and_an_enabled_mechanism() -> None:
    with pytest.raises(ConfigError, match="needs the broker's username"):
        ClientSecurity.from_config(_config(**{
            "listener.name.sasl_ssl.plain.sasl.jaas.config":
                'x.PlainLoginModule required user_broker="pw";'}))
    with pytest.raises(ConfigError, match="must be included in sasl.enabled.mechanisms"):
        ClientSecurity.from_config(_config(**{
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512"}))
    security = ClientSecurity.from_config(_config(**{
        "listener.name.sasl_ssl.plain.sasl.jaas.config":
            'x.PlainLoginModule required username="broker" password="pw" user_broker="pw";'}))
    assert (security.listener, security.security_protocol, security.mechanism,
            security.username, security.password) == ("SASL_SSL", "SASL_SSL", "PLAIN",
                                                      "broker", "pw")
    assert security.tls is not None and security.tls.check_hostname
