"""SaslHandshake (17) and SaslAuthenticate (36).

Before authentication the connection's SaslSession (broker/security/sasl.py) answers them; the
dispatcher lets nothing else through. A SaslHandshake on an authenticated connection begins a
re-authentication when the session has a lifetime (KIP-368, the dispatcher decides); otherwise
reaching them afterwards, or on a listener without SASL, is Kafka's KafkaApis case:
ILLEGAL_SASL_STATE.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from samsa.protocol.errors import ErrorCode

from ..context import RequestContext
from .declare import api

if TYPE_CHECKING:
    from .requests import SaslAuthenticateRequest, SaslHandshakeRequest


@api(17, "SaslHandshake", (0, 1))
async def handle_sasl_handshake(
    ctx: RequestContext, request: SaslHandshakeRequest
) -> dict[str, Any]:
    session = ctx.sasl
    if session is None or session.complete:
        return {"error_code": ErrorCode.illegal_sasl_state, "mechanisms": []}
    return session.handshake(request.mechanism, ctx.version)


@api(36, "SaslAuthenticate", (0, 2))
async def handle_sasl_authenticate(
    ctx: RequestContext, request: SaslAuthenticateRequest
) -> dict[str, Any] | None:
    session = ctx.sasl
    if session is None or session.complete:
        return {"error_code": ErrorCode.illegal_sasl_state,
                "error_message": "SaslAuthenticate request received after successful "
                                 "authentication",
                "auth_bytes": b"", "session_lifetime": 0}
    return await session.authenticate(request.auth_bytes, ctx.version)
