"""The broker's Python cost per request and per partition-batch, without sockets (issue 47).

A broker is built in this process (as tests/protocol/test_fuzz_decoder.py does) and its
dispatcher is handed ready-made request frames on one event loop: what is measured is the
CPU of decoding, handling and encoding, nothing of the kernel's or a client's. Loads:

- produce: idempotent Produce v9, acks=-1, each request carrying batches of --records records
  (one by default; many for a saturated producer's batches) of --size bytes for --per-request
  partitions of a --partitions topic, partitions taken in turn (librdkafka sends one
  partition per request: --per-request 1; a Java producer at a tenth of its capacity sends
  many); with --plain acks=1 and batches without a producer id or keys, as ProducerPerformance
  sends with acks=1 (its 16 KB batch of ~160 records of 100 B: --records 160 --size 100);
- fetch: Fetch v12 of every partition of the topic from the offsets last read, after each
  produce request (a consumer of many partitions at a low rate: little data per partition);
- session: the fetch load in an incremental fetch session (KIP-227), as the Java consumer and
  kafka-python send it: the first fetch opens the session, each next one names only the
  partitions whose offsets moved since the last;
- follower: the same from a follower in the ISR (each partition given a second replica, a
  broker that does not exist), as the replica fetcher asks it: Fetch v15 by topic id with the
  follower's id, the leader epoch and the last fetched epoch (its produce requests acks=1,
  since nothing else moves the high watermark).

    .venv/bin/python bench/batch_cost.py --partitions 500 --per-request 1
    .venv/bin/python bench/batch_cost.py --plain --records 160 --size 100 --partitions 1
    .venv/bin/python bench/batch_cost.py --partitions 500 --per-request 12 --profile
    .venv/bin/python bench/batch_cost.py --load fetch --partitions 500
    .venv/bin/python bench/batch_cost.py --load session --partitions 500
    .venv/bin/python bench/batch_cost.py --load follower --partitions 500

Printed: CPU (time.process_time) per request and per partition-batch, the median of
--rounds rounds; with --profile, cProfile's top functions over one more round.

With --sockets N the broker serves its listener and a client process (this script run as
`batch_cost.py client ...`, doing nothing but send and read) sends the same produce frames
over N connections, --in-flight at a time on each (librdkafka: 5), a partition always on the
same connection: the broker's CPU a request then includes reading the frames from the
sockets and writing the answers (the event loop, the connection's task, the kernel's send
and receive), everything of a request over the network but the client.

    .venv/bin/python bench/batch_cost.py --sockets 8 --in-flight 5
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from samsa.broker.app import Broker  # noqa: E402
from samsa.broker.network.server import ConnectionInfo  # noqa: E402
from samsa.config.loader import load_config  # noqa: E402
from samsa.protocol.codec import build, encode, reader, request_type, response_type  # noqa: E402
from samsa.protocol.records import build_batch  # noqa: E402


class Harness:
    def __init__(self, data: Path, serve: bool = False) -> None:
        config = load_config(None, {"log.dirs": str(data),
                                    "listeners": "PLAINTEXT://127.0.0.1:0"})
        self.broker = Broker(config)
        if not serve:  # else Broker.start loads them
            self.broker.log_manager.startup(self.broker._config_for_topic_name)
            self.broker.replicas.load_all()
        self.dispatch = self.broker.dispatcher
        self.conn = ConnectionInfo("bench:0", None)  # type: ignore[arg-type]
        self._correlation = 0

    def frame(self, api_key: int, version: int, body: dict[str, Any]) -> bytes:
        self._correlation += 1
        req_type = request_type(api_key, version)
        header = struct.pack(">hhih", api_key, version, self._correlation, 5) + b"bench"
        if req_type.__flexible__:
            header += b"\x00"
        return header + encode(build(req_type, body))

    async def call(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        parts = await self.dispatch(self.frame(api_key, version, body), self.conn)
        assert parts is not None
        data = b"".join(bytes(p) for p in parts[1:]  # type: ignore[arg-type]  # no regions
                        )  # after the size prefix
        resp_type = response_type(api_key, version)
        offset = 5 if resp_type.__flexible__ else 4
        return reader(resp_type)(data, offset)[0]


async def produce_frames(h: Harness, topic: str, partitions: int, per_request: int,
                         size: int, count: int, records: int = 1, acks: int = -1,
                         plain: bool = False) -> list[bytes]:
    """`plain`: batches without a producer id and records without keys, as Kafka's
    ProducerPerformance sends them with acks=1 (its idempotence is off unless acks=all)."""
    pid = epoch = -1
    if not plain:
        init = await h.call(22, 4, {"transactional_id": None,
                                    "transaction_timeout_ms": 60_000,
                                    "producer_id": -1, "producer_epoch": -1})
        pid, epoch = init.producer_id, init.producer_epoch
    sequences = [0] * partitions
    frames, nxt, value = [], 0, b"v" * size
    now = int(time.time() * 1000)
    for _ in range(count):
        data = []
        for _ in range(per_request):
            p, nxt = nxt, (nxt + 1) % partitions
            batch = build_batch([(None if plain else b"key-%d" % p, value)] * records,
                                producer_id=pid, producer_epoch=epoch,
                                base_sequence=-1 if plain else sequences[p],
                                default_timestamp=now)
            sequences[p] += records
            data.append({"index": p, "records": bytes(batch)})
        frames.append(h.frame(0, 9, {"transactional_id": None, "acks": acks,
                                     "timeout_ms": 30_000,
                                     "topic_data": [{"name": topic, "partition_data": data}]}))
    return frames


def fetch_body(topic: str, offsets: dict[int, int], session_id: int = 0,
               session_epoch: int = -1) -> dict[str, Any]:
    """Fetch v12 of the partitions `offsets` names, from their offsets."""
    return {
        "replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 52_428_800,
        "isolation_level": 0, "session_id": session_id, "session_epoch": session_epoch,
        "topics": [{"topic": topic, "partitions": [{
            "partition": p, "current_leader_epoch": -1, "fetch_offset": o,
            "last_fetched_epoch": -1, "log_start_offset": -1,
            "partition_max_bytes": 1 << 20} for p, o in offsets.items()]}] if offsets else [],
        "forgotten_topics_data": [], "rack_id": ""}


def fetch_frame(h: Harness, topic: str, offsets: list[int]) -> bytes:
    return h.frame(1, 12, fetch_body(topic, dict(enumerate(offsets))))


class Session:
    """A consumer's incremental fetch session: the offsets it has sent, its id and epoch."""

    def __init__(self) -> None:
        self.sent: list[int] = []
        self.id = 0
        self.epoch = 0

    async def open(self, h: Harness, topic: str, offsets: list[int]) -> None:
        answer = await h.call(1, 12, fetch_body(topic, dict(enumerate(offsets)), 0, 0))
        assert answer.session_id != 0, "no fetch session opened"
        self.id, self.epoch, self.sent = answer.session_id, 1, list(offsets)

    def frame(self, h: Harness, topic: str, offsets: list[int]) -> bytes:
        """The next incremental fetch: the partitions whose offsets moved."""
        moved = {p: o for p, o in enumerate(offsets) if o != self.sent[p]}
        frame = h.frame(1, 12, fetch_body(topic, moved, self.id, self.epoch))
        self.sent, self.epoch = list(offsets), self.epoch + 1
        return frame


def follower_fetch_frame(h: Harness, topic: str, offsets: list[int], replica_id: int
                         ) -> bytes:
    """What broker/replication/replica_fetcher.py sends: v15 by topic id, the follower's id,
    each partition's leader epoch and the epoch of the last record it has (-1: none)."""
    parts = [h.broker.replicas.get(topic, p) for p in range(len(offsets))]
    return h.frame(1, 15, {
        "replica_state": {"replica_id": replica_id, "replica_epoch": -1},
        "max_wait": 0, "min_bytes": 1, "max_bytes": 10 << 20, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1,
        "topics": [{"topic_id": parts[0].topic_id, "partitions": [{
            "partition": p.index, "current_leader_epoch": p.leader_epoch, "fetch_offset": o,
            "last_fetched_epoch": p.leader_epoch if o > 0 else -1, "log_start_offset": 0,
            "partition_max_bytes": 1 << 20} for p, o in zip(parts, offsets, strict=True)]}],
        "forgotten_topics_data": [], "rack_id": ""})


def add_follower(h: Harness, topic: str) -> int:
    """Give each partition of `topic` a second replica in its ISR; its id."""
    follower = -1
    for p in h.broker.replicas.partitions():
        if p.topic == topic:
            follower = p.broker_id + 1
            replicas = [p.broker_id, follower]
            p.make_leader(p.leader_epoch, replicas, replicas)
    return follower


_SIZE = struct.Struct(">i")


def client(port: int, frames_file: str, connections: int, in_flight: int, blocks: int
           ) -> None:
    """`batch_cost.py client`: each "go" on stdin sends the next round of frames and prints
    "done" once every answer is read. Frame i carries the partitions of block i % blocks (one
    partition per request: block = partition), and a block is always sent on one connection,
    so that each partition's sequence numbers arrive in order."""
    with open(frames_file, "rb") as f:
        data = f.read()
    frames, pos = [], 0
    while pos < len(data):
        (size,) = _SIZE.unpack_from(data, pos)
        frames.append(data[pos:pos + 4 + size])
        pos += 4 + size
    per_round = int(sys.stdin.readline())
    socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(connections)]
    for s in socks:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    print("ready", flush=True)
    done = 0
    while sys.stdin.readline().strip() == "go":
        todo = frames[done:done + per_round]
        done += per_round
        shares: list[list[bytes]] = [[] for _ in socks]
        for i, frame in enumerate(todo, done - per_round):
            shares[(i % blocks) % connections].append(frame)  # a partition on one socket
        threads = [threading.Thread(target=_send_share, args=(s, share, in_flight))
                   for s, share in zip(socks, shares, strict=True)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print("done", flush=True)


def _send_share(sock: socket.socket, frames: list[bytes], in_flight: int) -> None:
    sent = answered = 0
    buf = b""
    while answered < len(frames):
        while sent < len(frames) and sent - answered < in_flight:
            sock.sendall(frames[sent])
            sent += 1
        chunk = sock.recv(1 << 16)
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        buf += chunk
        while len(buf) >= 4:
            (size,) = _SIZE.unpack_from(buf, 0)
            if len(buf) < 4 + size:
                break
            buf = buf[4 + size:]
            answered += 1


async def run(args: argparse.Namespace) -> None:
    if args.sockets:
        await run_sockets(args)
        return
    with tempfile.TemporaryDirectory(prefix="batch-cost-") as tmp:
        h = Harness(Path(tmp))
        topic = "cost"
        created = await h.call(19, 5, {"topics": [{
            "name": topic, "num_partitions": args.partitions, "replication_factor": 1,
            "assignments": [], "configs": []}], "timeout_ms": 60_000, "validate_only": False})
        assert created.topics[0].error_code == 0, created
        list(h.broker.replicas.partitions())  # every log created before the clock
        rounds = args.rounds + (1 if args.profile else 0)
        follower = add_follower(h, topic) if args.load == "follower" else -1
        frames = await produce_frames(h, topic, args.partitions, args.per_request, args.size,
                                      args.requests * (rounds + 1), args.records,
                                      acks=1 if follower >= 0 or args.plain else -1,
                                      plain=args.plain)
        produced = 0
        offsets = [0] * args.partitions
        session: Session | None = None
        if args.load == "session":
            session = Session()
            await session.open(h, topic, offsets)

        async def produce_round(prof: cProfile.Profile | None = None) -> tuple[int, int, float]:
            nonlocal produced
            todo = frames[produced:produced + args.requests]
            produced += args.requests
            t0 = time.process_time()
            if prof is not None:
                prof.enable()
            for f in todo:
                await h.dispatch(f, h.conn)
            if prof is not None:
                prof.disable()
            return len(todo), len(todo) * args.per_request, time.process_time() - t0

        async def fetch_round(prof: cProfile.Profile | None = None) -> tuple[int, int, float]:
            # Produce one request, then fetch every partition from where the last fetch ended:
            # the fetches (built ahead, outside the clock) are what is timed.
            nonlocal produced
            cpu = 0.0
            for f in frames[produced:produced + args.requests]:
                await h.dispatch(f, h.conn)
                if follower >= 0:
                    fetch = follower_fetch_frame(h, topic, offsets, follower)
                elif session is not None:
                    fetch = session.frame(h, topic, offsets)
                else:
                    fetch = fetch_frame(h, topic, offsets)
                t0 = time.process_time()
                if prof is not None:
                    prof.enable()
                await h.dispatch(fetch, h.conn)
                if prof is not None:
                    prof.disable()
                cpu += time.process_time() - t0
                for i in range(args.per_request):
                    offsets[(produced * args.per_request + i) % args.partitions] += 1
                produced += 1
            return args.requests, args.requests * args.partitions, cpu

        one_round = produce_round if args.load == "produce" else fetch_round
        await one_round()  # warm-up: caches, first segment writes
        per_req, per_batch = [], []
        for _ in range(args.rounds):
            requests, batches, cpu = await one_round()
            per_req.append(1e6 * cpu / requests)
            per_batch.append(1e6 * cpu / batches)
        what = {"fetch": "fetch of every partition after one produce request",
                "session": "incremental fetch (a session of every partition) after one "
                           "produce request",
                "follower": "a follower's fetch of every partition after one produce request",
                }.get(args.load, f"produce of {args.per_request} batch(es) of {args.records} "
                                 f"record(s) of {args.size} B")
        print(f"{args.load}: {args.partitions} partitions, {what}: "
              f"{statistics.median(per_req):.1f} us/request, "
              f"{statistics.median(per_batch):.2f} us/partition "
              f"(rounds: {', '.join(f'{x:.1f}' for x in per_req)} us/request)")
        if args.profile:
            prof = cProfile.Profile()
            await one_round(prof)
            pstats.Stats(prof).sort_stats(args.sort).print_stats(args.top)
        h.broker.log_manager.shutdown()


async def run_sockets(args: argparse.Namespace) -> None:
    """The produce load over sockets: the broker's CPU (this process's) while a client
    process sends each round's frames and reads their answers."""
    assert args.load == "produce", "--sockets measures the produce load"
    assert args.partitions % args.per_request == 0, "--per-request must divide --partitions"
    with tempfile.TemporaryDirectory(prefix="batch-cost-") as tmp:
        h = Harness(Path(tmp) / "data", serve=True)
        await h.broker.start()
        topic = "cost"
        created = await h.call(19, 5, {"topics": [{
            "name": topic, "num_partitions": args.partitions, "replication_factor": 1,
            "assignments": [], "configs": []}], "timeout_ms": 60_000, "validate_only": False})
        assert created.topics[0].error_code == 0, created
        list(h.broker.replicas.partitions())
        rounds = args.rounds + 1 + (1 if args.profile else 0)
        frames = await produce_frames(h, topic, args.partitions, args.per_request, args.size,
                                      args.requests * rounds, args.records,
                                      acks=1 if args.plain else -1, plain=args.plain)
        frames_file = Path(tmp) / "frames"
        frames_file.write_bytes(b"".join(_SIZE.pack(len(f)) + f for f in frames))
        proc = await asyncio.create_subprocess_exec(
            sys.executable, __file__, "client", str(h.broker.server.port), str(frames_file),
            str(args.sockets), str(args.in_flight), str(args.partitions // args.per_request),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(b"%d\n" % args.requests)
        assert (await proc.stdout.readline()).strip() == b"ready"

        system = 0.0  # of the rounds measured: the kernel's share (system time)
        walls: list[float] = []  # each round's wall time: the answers' latency counts there

        async def one_round(prof: cProfile.Profile | None = None) -> float:
            nonlocal system
            assert proc.stdin is not None and proc.stdout is not None
            t0, sys0, wall0 = time.process_time(), os.times().system, time.perf_counter()
            if prof is not None:
                prof.enable()
            proc.stdin.write(b"go\n")
            line = await proc.stdout.readline()
            if prof is not None:
                prof.disable()
            assert line.strip() == b"done", line
            system += os.times().system - sys0
            walls.append(time.perf_counter() - wall0)
            return time.process_time() - t0

        await one_round()  # warm-up
        system = 0.0
        walls.clear()
        per_req = [1e6 * await one_round() / args.requests for _ in range(args.rounds)]
        kernel = 1e6 * system / (args.requests * args.rounds)
        print(f"produce over {args.sockets} sockets, {args.in_flight} in flight: "
              f"{args.partitions} partitions, {args.per_request} batch(es) of {args.records} "
              f"record(s) of {args.size} B: {statistics.median(per_req):.1f} us/request, "
              f"{statistics.median(per_req) / args.per_request:.2f} us/partition "
              f"(rounds: {', '.join(f'{x:.1f}' for x in per_req)} us/request; "
              f"of which system time {kernel:.1f} us/request; wall time "
              f"{1e6 * statistics.median(walls) / args.requests:.1f} us/request)")
        if args.profile:  # CPU time: a write that wakes the client is not charged its wait
            prof = cProfile.Profile(time.process_time)
            await one_round(prof)
            pstats.Stats(prof).sort_stats(args.sort).print_stats(args.top)
        proc.stdin.close()
        await proc.wait()
        await h.broker.stop()


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "client":
        port, frames_file, connections, in_flight, blocks = sys.argv[2:7]
        client(int(port), frames_file, int(connections), int(in_flight), int(blocks))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--load", choices=("produce", "fetch", "session", "follower"),
                    default="produce")
    ap.add_argument("--partitions", type=int, default=500)
    ap.add_argument("--per-request", type=int, default=1,
                    help="partition-batches a produce request carries")
    ap.add_argument("--size", type=int, default=200)
    ap.add_argument("--records", type=int, default=1, help="records a batch (--load produce)")
    ap.add_argument("--plain", action="store_true",
                    help="acks=1, no producer id, null keys: ProducerPerformance's batches "
                         "with acks=1 (its 16 KB batch of 100 B records: --records 160 "
                         "--size 100 --partitions 1)")
    ap.add_argument("--requests", type=int, default=2000, help="requests a round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--sockets", type=int, default=0,
                    help="serve the listener and send the produce frames over this many "
                         "connections from a client process")
    ap.add_argument("--in-flight", type=int, default=5, help="requests in flight a socket")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--sort", default="tottime")
    ap.add_argument("--top", type=int, default=40)
    args = ap.parse_args()
    try:
        import uvloop
        uvloop.run(run(args))
    except ImportError:
        asyncio.run(run(args))


if __name__ == "__main__":
    main()
