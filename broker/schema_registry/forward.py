"""Requests a broker that is not the registry's primary passes on to the primary (Confluent's
followers forward so too): the answer is the primary's. A forwarded request is marked, so that
two brokers that each take the other for the primary (a leadership moving) do not pass it back
and forth: the second answers 50003."""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import errors
from .primary import PrimaryLocator

if TYPE_CHECKING:
    import ssl

    import aiohttp
    from aiohttp import web

FORWARDED = "X-Samsa-Registry-Forwarded"
TIMEOUT_S = 30.0


class Forwarder:
    def __init__(self, locator: PrimaryLocator, client_tls: ssl.SSLContext | None = None,
                 login: str | None = None) -> None:
        self.locator = locator
        self.client_tls = client_tls  # how an https primary is reached
        self.login = login  # the Authorization of this broker's own requests (get)
        self._session: aiohttp.ClientSession | None = None

    async def forward(self, request: web.Request, body: bytes) -> tuple[int, bytes, str]:
        """The primary's status, body and content type for the request."""
        import aiohttp

        if FORWARDED in request.headers:
            raise errors.not_primary("the request was forwarded here by a broker that took "
                                     "this one for the primary")
        url = await self.locator.url()
        if url is None:
            raise errors.not_primary("no primary with a registry is known")
        headers = {"Content-Type": request.headers.get("Content-Type", "application/json"),
                   FORWARDED: "1"}
        if "Authorization" in request.headers:  # the primary checks the client's login
            headers["Authorization"] = request.headers["Authorization"]
        try:
            async with self._client().request(request.method, url + request.path_qs,
                                             data=body, headers=headers) as resp:
                return resp.status, await resp.read(), resp.content_type
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise errors.not_primary(f"{url}: {exc!r}") from exc

    async def get(self, path: str) -> object | None:
        """The primary's JSON answer to GET `path`; None when it is a 404."""
        import aiohttp

        url = await self.locator.url()
        if url is None:
            raise errors.not_primary("no primary with a registry is known")
        try:
            headers = {FORWARDED: "1"} | ({"Authorization": self.login} if self.login else {})
            async with self._client().get(url + path, headers=headers) as resp:
                if resp.status == 404:
                    return None
                if resp.status != 200:
                    raise errors.not_primary(f"{url}{path}: HTTP {resp.status}")
                return await resp.json(content_type=None)
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise errors.not_primary(f"{url}: {exc!r}") from exc

    def _client(self) -> aiohttp.ClientSession:
        import aiohttp

        if self._session is None:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=TIMEOUT_S),
                connector=aiohttp.TCPConnector(ssl=self.client_tls or True))
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
