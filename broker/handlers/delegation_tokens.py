"""Delegation tokens: CreateDelegationToken (38), RenewDelegationToken (39),
ExpireDelegationToken (40) and DescribeDelegationToken (41), as Kafka's KafkaApis and
DelegationTokenManager answer them (broker/security/tokens.py keeps the lifecycle).

Token requests are refused (DELEGATION_TOKEN_REQUEST_NOT_ALLOWED) on PLAINTEXT listeners, from
an anonymous client on SSL, and from a client that logged in with a token; without
delegation.token.secret.key they answer DELEGATION_TOKEN_AUTH_DISABLED.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from samsa.protocol.codec import millis
from samsa.protocol.errors import ErrorCode

from ..context import ANONYMOUS, KafkaPrincipal, RequestContext
from ..security.authorizer import AclOperation, ResourceType
from ..security.tokens import TokenError, TokenInformation, TokenManager
from .common import field
from .declare import api

if TYPE_CHECKING:
    from .requests import (
        CreateDelegationTokenRequest,
        DescribeDelegationTokenRequest,
        ExpireDelegationTokenRequest,
        RenewDelegationTokenRequest,
    )

USER_TYPE = "User"
ERROR_TIMESTAMP = -1  # DelegationTokenManager.ErrorTimestamp


def tokens_of(ctx: RequestContext) -> TokenManager:
    return TokenManager(ctx.config, ctx.store.delegation_tokens)


def allows_token_requests(ctx: RequestContext) -> bool:
    """Kafka's KafkaApis.allowTokenRequests."""
    if ctx.sasl is not None and ctx.sasl.token_authenticated:
        return False
    protocol = next((li.security_protocol for li in ctx.config.listeners
                     if li.name == ctx.listener), "PLAINTEXT")
    return not (protocol == "PLAINTEXT" or (protocol == "SSL" and ctx.principal == ANONYMOUS))


@api(38, "CreateDelegationToken", (1, 3))
async def handle_create_delegation_token(
    ctx: RequestContext, request: CreateDelegationTokenRequest
) -> dict[str, Any]:
    requester = ctx.principal
    owner_name = field(request, "owner_principal_name", None)
    owner = (KafkaPrincipal(field(request, "owner_principal_type", None) or USER_TYPE,
                            owner_name) if owner_name else requester)
    renewers = tuple(KafkaPrincipal(r.principal_type, r.principal_name)
                     for r in request.renewers)

    def answer(code: ErrorCode, info: TokenInformation | None = None,
               hmac: bytes = b"") -> dict[str, Any]:
        return {"throttle_time": 0, "error_code": code,
                "principal_type": owner.principal_type, "principal_name": owner.name,
                "token_requester_principal_type": requester.principal_type,
                "token_requester_principal_name": requester.name,
                "issue_timestamp": info.issue_ms if info else ERROR_TIMESTAMP,
                "expiry_timestamp": info.expiry_ms if info else ERROR_TIMESTAMP,
                "max_timestamp": info.max_ms if info else ERROR_TIMESTAMP,
                "token_id": info.token_id if info else "", "hmac": hmac}

    if not allows_token_requests(ctx):
        return answer(ErrorCode.delegation_token_request_not_allowed)
    # KIP-373: a token for someone else needs CreateTokens on that user
    if owner != requester and not ctx.authorize(AclOperation.CREATE_TOKENS, ResourceType.USER,
                                                str(owner)):
        return answer(ErrorCode.delegation_token_authorization_failed)
    if any(r.principal_type != USER_TYPE for r in renewers):
        return answer(ErrorCode.invalid_principal_type)
    try:
        info, hmac = await tokens_of(ctx).create(owner, requester, renewers,
                                                 millis(request.max_lifetime), ctx.received_ms)
    except TokenError as exc:
        return answer(exc.error_code)
    return answer(ErrorCode.none, info, hmac)


def _expiry_answer(code: ErrorCode, expiry: int = ERROR_TIMESTAMP) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": code, "expiry_timestamp": expiry}


async def _new_expiry(ctx: RequestContext, renew: bool, hmac: bytes,
                      period_ms: int) -> dict[str, Any]:
    """Renew and Expire: the token's new expiry time, or why it has none."""
    if not allows_token_requests(ctx):
        return _expiry_answer(ErrorCode.delegation_token_request_not_allowed)
    manager = tokens_of(ctx)
    change = manager.renew if renew else manager.expire
    try:
        expiry = await change(ctx.principal, hmac, period_ms, ctx.received_ms)
    except TokenError as exc:
        return _expiry_answer(exc.error_code)
    return _expiry_answer(ErrorCode.none, expiry)


@api(39, "RenewDelegationToken", (1, 2))
async def handle_renew_delegation_token(
    ctx: RequestContext, request: RenewDelegationTokenRequest
) -> dict[str, Any]:
    return await _new_expiry(ctx, True, request.hmac, millis(request.renew_period))


@api(40, "ExpireDelegationToken", (1, 2))
async def handle_expire_delegation_token(
    ctx: RequestContext, request: ExpireDelegationTokenRequest
) -> dict[str, Any]:
    return await _new_expiry(ctx, False, request.hmac, millis(request.expiry_time_period))


@api(41, "DescribeDelegationToken", (1, 3))
async def handle_describe_delegation_token(
    ctx: RequestContext, request: DescribeDelegationTokenRequest
) -> dict[str, Any]:
    def answer(code: ErrorCode, tokens: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        return {"throttle_time": 0, "error_code": code, "tokens": tokens or []}

    if not allows_token_requests(ctx):
        return answer(ErrorCode.delegation_token_request_not_allowed)
    manager = tokens_of(ctx)
    if not manager.enabled:
        return answer(ErrorCode.delegation_token_auth_disabled)
    if request.owners is not None and not request.owners:
        return answer(ErrorCode.none)  # an empty list of owners asks for no token
    owners = (None if request.owners is None else
              [KafkaPrincipal(o.principal_type, o.principal_name) for o in request.owners])
    infos = [t for t in list(ctx.store.delegation_tokens.tokens().values())
             if _visible(ctx, owners, t)]
    return answer(ErrorCode.none, [_described(t, manager.hmac_of(t)) for t in infos])


def _visible(ctx: RequestContext, owners: list[KafkaPrincipal] | None,
             token: TokenInformation) -> bool:
    """DelegationTokenManager.filterToken: among the owners asked for (owner or renewer of
    it), the principal's own tokens, those it may describe and those of users it may
    describe the tokens of."""
    if owners is not None and not any(token.owner_or_renewer(o) for o in owners):
        return False
    if token.owner_or_renewer(ctx.principal):
        return True
    return (ctx.authorize(AclOperation.DESCRIBE, ResourceType.DELEGATION_TOKEN, token.token_id)
            or ctx.authorize(AclOperation.DESCRIBE_TOKENS, ResourceType.USER, str(token.owner)))


def _described(t: TokenInformation, hmac: bytes) -> dict[str, Any]:
    return {"principal_type": t.owner.principal_type, "principal_name": t.owner.name,
            "token_requester_principal_type": t.requester.principal_type,
            "token_requester_principal_name": t.requester.name,
            "issue_timestamp": t.issue_ms, "expiry_timestamp": t.expiry_ms,
            "max_timestamp": t.max_ms, "token_id": t.token_id, "hmac": hmac,
            "renewers": [{"principal_type": r.principal_type, "principal_name": r.name}
                         for r in t.renewers]}
