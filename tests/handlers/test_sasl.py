"""SaslHandshake (17), SaslAuthenticate (36): a SASL listener's connection picks a mechanism,
then exchanges its tokens; outside an authentication both are ILLEGAL_SASL_STATE."""

from __future__ import annotations

from samsa.broker.security.sasl import SaslConfig, SaslSession
from samsa.protocol.errors import ErrorCode


def _session() -> SaslSession:
    config = SaslConfig("SASL_PLAINTEXT", ("PLAIN",), {"alice": "secret"},
                        scram=lambda user, mechanism: None, failed_delay_ms=0)
    return SaslSession(config, "127.0.0.1:50000")


async def test_plain_handshake_and_authentication(handlers):
    session = _session()
    shake = await handlers.call("SaslHandshake", 1, {"mechanism": "PLAIN"}, sasl=session)
    auth = await handlers.call("SaslAuthenticate", 2, {"auth_bytes": b"\0alice\0secret"},
                               sasl=session)
    assert (shake.error_code, shake.mechanisms) == (ErrorCode.none, ("PLAIN",))
    assert auth.error_code == ErrorCode.none
    assert session.complete and str(session.principal) == "User:alice"


async def test_wrong_password(handlers):
    session = _session()
    await handlers.call("SaslHandshake", 1, {"mechanism": "PLAIN"}, sasl=session)
    auth = await handlers.call("SaslAuthenticate", 2, {"auth_bytes": b"\0alice\0guess"},
                               sasl=session)
    assert auth.error_code == ErrorCode.sasl_authentication_failed
    assert session.failed


async def test_unsupported_mechanism_lists_the_enabled_ones(handlers):
    r = await handlers.call("SaslHandshake", 1, {"mechanism": "GSSAPI"}, sasl=_session())
    assert (r.error_code, r.mechanisms) == (ErrorCode.unsupported_sasl_mechanism, ("PLAIN",))


async def test_outside_an_authentication(handlers):
    shake = await handlers.call("SaslHandshake", 1, {"mechanism": "PLAIN"})
    auth = await handlers.call("SaslAuthenticate", 2, {"auth_bytes": b""})
    assert shake.error_code == auth.error_code == ErrorCode.illegal_sasl_state
