"""Socket server properties: buffers, connection limits and quota windows."""

from __future__ import annotations

from samsa.config.schema.property_def import G_SOCKET, I, L, PropertyDef, prop
from samsa.config.schema.validators import at_least
from samsa.config.schema.values import INT_MAX

SOCKET: list[PropertyDef] = [
    # Not Kafka's 102400: a 1 MiB Fetch answer then leaves in one write instead of four, each
    # a wake-up of the event loop; the broker's CPU per such answer is ~25 % lower
    # (docs/performance.md, "The socket send buffer").
    prop("socket.send.buffer.bytes", I, -1, "SO_SNDBUF of accepted sockets; -1 keeps the OS "
         "default (Linux then sizes the buffer to the connection).", at_least(-1),
         kafka=102400, group=G_SOCKET),
    prop("socket.receive.buffer.bytes", I, 102400, "SO_RCVBUF of accepted sockets; -1 keeps the "
         "OS default.", at_least(-1), group=G_SOCKET),
    prop("socket.request.max.bytes", I, 104857600, "Largest request the broker reads; bigger "
         "ones close the connection.", at_least(1), group=G_SOCKET),
    # Not Kafka's 50: a burst of connections beyond the backlog has its SYNs (or their ACKs)
    # dropped by the kernel, and those clients retry after 1, 3, 7 s; 2,000 connections opened
    # at once took 15 s with 50 and are all answered in half a second with 4096.
    prop("socket.listen.backlog.size", I, 4096, "listen() backlog: connections the kernel "
         "completes before the broker accepts them (capped by net.core.somaxconn).",
         at_least(1), kafka=50, group=G_SOCKET),
    prop("max.connections", I, INT_MAX, "Most connections at once; further ones wait (not "
         "accepted) until one closes.", at_least(0), group=G_SOCKET),
    prop("max.connections.per.ip", I, INT_MAX, "Most connections from one address; a further "
         "one is closed as soon as it is accepted.", at_least(0), group=G_SOCKET),
    prop("max.connection.creation.rate", I, INT_MAX, "Most new connections a second the "
         "broker accepts (a burst of one second's worth); over it, accepting waits. "
         "listener.name.<listener>.max.connection.creation.rate sets a listener's own rate.",
         at_least(0), group=G_SOCKET),
    prop("connections.max.idle.ms", L, 600000, "A connection with no request for this long is "
         "closed; -1 never closes one.", at_least(-1), group=G_SOCKET),
    prop("quota.window.num", I, 11, "The number of samples to retain in memory for client "
         "quotas (a client's rate is measured over them).", at_least(1), group=G_SOCKET),
    prop("quota.window.size.seconds", I, 1, "The time span of each sample for client quotas.",
         at_least(1), group=G_SOCKET),
    prop("controller.quota.window.num", I, 11, "The number of samples of the controller "
         "mutation quota (controller_mutation_rate): its burst is num x size x rate.",
         at_least(1), group=G_SOCKET),
    prop("controller.quota.window.size.seconds", I, 1, "The time span of each sample of the "
         "controller mutation quota.", at_least(1), group=G_SOCKET),
    # Not Kafka's -1 (unbounded): a client announcing 100 MB requests could otherwise make the
    # broker hold that much per connection. 256 MiB takes two requests of socket.request.max.bytes
    # besides a few hundred 1 MB Produce requests at once.
    prop("queued.max.request.bytes", L, 268435456, "Most bytes of requests in flight (each "
         "counted at its announced size, from when its bytes start arriving beyond a 64 KiB "
         "read buffer until it is answered); while they are reached, connections with such a "
         "request to read are not read, the others are; -1 is unbounded. At least "
         "socket.request.max.bytes when set.", at_least(-1), kafka=-1, group=G_SOCKET),
    prop("queued.max.requests", I, 500, "Requests queued before reading pauses.", at_least(1),
         group=G_SOCKET, ignored="each connection is handled one request at a time and there "
         "is no shared request queue to bound"),
]
