"""What the dispatch layer understands from a request handler besides its response.

Handlers raise these without importing the socket server; the dispatcher passes them on and the
server acts on them.
"""

from __future__ import annotations

from samsa.protocol.framing import Part


class CloseConnection(Exception):
    """Kafka's answer to this request is to close the connection: after writing `response`
    if given, and after `delay_s` (a failed authentication's delay)."""

    def __init__(self, reason: str, response: list[Part] | None = None,
                 delay_s: float = 0.0) -> None:
        super().__init__(reason)
        self.response = response
        self.delay_s = delay_s
