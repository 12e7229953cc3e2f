"""A token validator for the OAUTHBEARER hook (sasl.server.callback.handler.class) in the
tests: `good-<user>` tokens are valid for 30 s from now, anything else is refused."""

from __future__ import annotations

import time
from collections.abc import Mapping

from samsa.broker.security.oauthbearer import OAuthBearerToken, OAuthBearerValidationError


async def validate(token: str, options: Mapping[str, str]) -> OAuthBearerToken:
    if not token.startswith("good-"):
        raise OAuthBearerValidationError("not a good token")
    return OAuthBearerToken(token, token[len("good-"):], int(time.time() * 1000) + 30_000)
