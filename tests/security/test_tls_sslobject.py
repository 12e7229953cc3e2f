"""The SSL objects a listener's context hands the event loop (broker/security/tls.py's
DirectSSLObject): the C object's read, write and pending, with ssl.SSLObject's results and
exceptions, record for record, and what uvloop's SSL transport then uses."""

from __future__ import annotations

import asyncio
import os
import ssl
from collections.abc import Callable

import pytest
import uvloop

from samsa.broker.security.tls import DirectSSLObject, client_context, server_context
from samsa.config.schema import BrokerConfig
from tests.security.certs import Certs


def _config(certs: Certs) -> BrokerConfig:
    return BrokerConfig({
        "listeners": "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.broker.both),
        "ssl.truststore.location": str(certs.ca),
    })


Pair = tuple[ssl.SSLObject, ssl.MemoryBIO, ssl.MemoryBIO, ssl.SSLObject, ssl.MemoryBIO,
             ssl.MemoryBIO]


def _connected(server: ssl.SSLContext, client: ssl.SSLContext) -> Pair:
    """A client and a server SSL object over memory BIOs, handshake done: (client, its
    incoming, its outgoing, server, its incoming, its outgoing)."""
    c_in, c_out, s_in, s_out = (ssl.MemoryBIO() for _ in range(4))
    c = client.wrap_bio(c_in, c_out, server_hostname="127.0.0.1")
    s = server.wrap_bio(s_in, s_out, server_side=True)
    done = [False, False]
    for _ in range(10):
        for i, side in enumerate((c, s)):
            try:
                side.do_handshake()
                done[i] = True
            except ssl.SSLWantReadError:
                pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if all(done):
            return c, c_in, c_out, s, s_in, s_out
    raise AssertionError("no handshake")


def _drain(read: Callable[..., object], pending: Callable[[], int], incoming: ssl.MemoryBIO,
           buffer: bytearray) -> list[object]:
    """What the server side gives, call by call, as uvloop's buffered read does it: read into
    the buffer while the BIO or the SSL object holds bytes, until SSLWantReadError."""
    view = memoryview(buffer)
    got: list[object] = []
    try:
        while incoming.pending + pending() > 0:
            n = read(len(buffer), view)
            got.append(bytes(view[:n]))  # type: ignore[misc]
    except ssl.SSLWantReadError:
        got.append("want-read")
    return got


def test_listener_contexts_make_direct_ssl_objects(certs: Certs) -> None:
    config = _config(certs)
    for ctx, server_side in ((server_context(config, "SSL"), True),
                             (client_context(config, "SSL"), False)):
        obj = ctx.wrap_bio(ssl.MemoryBIO(), ssl.MemoryBIO(), server_side=server_side,
                           server_hostname=None if server_side else "127.0.0.1")
        assert isinstance(obj, DirectSSLObject)
        inner = obj._sslobj  # type: ignore[attr-defined]
        assert obj.read == inner.read and obj.write == inner.write
        assert obj.pending == inner.pending


def test_direct_ssl_object_reads_and_writes_as_ssl_object(certs: Certs) -> None:
    """The same records (small ones as librdkafka sends, one larger than a TLS record, one cut
    in two) give the same reads, pending counts and SSLWantReadError through DirectSSLObject
    as through ssl.SSLObject; and the server's writes read back the same."""
    config = _config(certs)
    client = client_context(config, "SSL")
    payloads = [bytes([i]) * 2200 for i in range(5)] + [os.urandom(40_000)]
    results = []
    for cls in (ssl.SSLObject, DirectSSLObject):
        server = server_context(config, "SSL")
        server.sslobject_class = cls
        c, c_in, c_out, s, s_in, s_out = _connected(server, client)
        assert type(s) is cls
        for p in payloads:
            assert c.write(p) == len(p)
        wire = c_out.read()
        cut = len(wire) - 100  # the last record arrives in two pieces
        s_in.write(wire[:cut])
        buffer = bytearray(64 * 1024)
        seen = _drain(s.read, s.pending, s_in, buffer)
        s_in.write(wire[cut:])
        seen += _drain(s.read, s.pending, s_in, buffer)
        assert b"".join(x for x in seen if isinstance(x, bytes)) == b"".join(payloads)
        assert s.write(memoryview(b"answer" * 5000)) == 30_000
        c_in.write(s_out.read())
        assert c.read(100_000) + c.read(100_000) == b"answer" * 5000
        results.append(seen)
    assert results[0] == results[1]


def test_direct_ssl_object_reports_the_peers_close(certs: Certs) -> None:
    """Nothing to read yet: SSLWantReadError; the client's close_notify: an empty read."""
    config = _config(certs)
    c, c_in, c_out, s, s_in, s_out = _connected(server_context(config, "SSL"),
                                                client_context(config, "SSL"))
    assert isinstance(s, DirectSSLObject)
    with pytest.raises(ssl.SSLWantReadError):
        s.read(10)
    with pytest.raises(ssl.SSLWantReadError):
        c.unwrap()  # sends close_notify, then waits for the server's
    s_in.write(c_out.read())
    assert s.read(10) == b""  # close_notify: the end of the stream (what uvloop looks for)


@pytest.mark.parametrize("loop_factory", [uvloop.new_event_loop, asyncio.new_event_loop],
                         ids=["uvloop", "asyncio"])
def test_event_loop_transport_uses_the_direct_object(
        certs: Certs, loop_factory: Callable[[], asyncio.AbstractEventLoop]) -> None:
    """A TLS server on the broker's event loop (uvloop; asyncio's own where uvloop is missing)
    given a listener's context: its connection's SSL object is a DirectSSLObject, and bytes go
    both ways (many small TLS records in, one answer out)."""
    config = _config(certs)
    server_ctx, client_ctx = server_context(config, "SSL"), client_context(config, "SSL")

    class Echo(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.transport = transport
            seen.append(transport.get_extra_info("ssl_object"))
            self.total = 0

        def data_received(self, data: bytes) -> None:
            self.total += len(data)
            if self.total == 50 * 2200:
                self.transport.write(b"done")  # type: ignore[attr-defined]

    seen: list[object] = []

    async def main() -> bytes:
        srv = await asyncio.get_running_loop().create_server(Echo, "127.0.0.1", 0,
                                                             ssl=server_ctx)
        port = srv.sockets[0].getsockname()[1]
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client_ctx,
                                                       server_hostname="127.0.0.1")
        for i in range(50):
            writer.write(bytes([i]) * 2200)
            await writer.drain()
        answer = await asyncio.wait_for(reader.readexactly(4), 10)
        writer.close()
        srv.close()
        await srv.wait_closed()
        return answer

    with asyncio.Runner(loop_factory=loop_factory) as runner:
        assert runner.run(main()) == b"done"
    assert len(seen) == 1 and isinstance(seen[0], DirectSSLObject)
