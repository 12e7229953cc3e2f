"""One client process of bench/run.py's many-clients phase (librdkafka via confluent-kafka).

    load_worker.py produce BOOTSTRAP TOPIC RECORDS SIZE PARTITIONS [LINGER_MS]
    load_worker.py consume BOOTSTRAP TOPIC RECORDS PARTITION[,PARTITION...]

Each connects and fetches metadata first, prints "ready", waits for a line on stdin (the
runner starts every client together), does its work and prints one JSON line: records done,
start and end (CLOCK_MONOTONIC, the same clock in every process) and the first errors. A
producer writes record i to partition i % PARTITIONS, so every partition gets the same
count; a consumer reads its partitions from offset 0 with assign() until it has RECORDS.
"""

from __future__ import annotations

import json
import os
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition


def produce(bootstrap: str, topic: str, n: int, size: int, partitions: int,
            linger_ms: int = 5, batch_size: int = 1_000_000) -> dict[str, object]:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": linger_ms,
                  "batch.size": batch_size, "queue.buffering.max.messages": 1_000_000,
                  "enable.idempotence": False})
    p.list_topics(topic, timeout=30)
    errors: list[str] = []

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None and len(errors) < 5:
            errors.append(str(err))

    payload = os.urandom(size)
    _ready()
    t0 = time.monotonic()
    for i in range(n):
        while True:
            try:
                p.produce(topic, payload, partition=i % partitions, on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.01)
    left = p.flush(600)
    return {"records": n - left, "start": t0, "end": time.monotonic(), "errors": errors}


def consume(bootstrap: str, topic: str, n: int, partitions: list[int]) -> dict[str, object]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-many-{topic}",
                  "enable.auto.commit": False, "fetch.max.bytes": 52_428_800,
                  # as bench/run.py's rdkafka_consume (RDKAFKA_FETCH_QUEUE_BACKOFF_MS): no 1 s
                  # client pause when the local queue is full
                  "fetch.queue.backoff.ms": 10})
    c.list_topics(topic, timeout=30)
    errors: list[str] = []
    seen = 0
    _ready()
    t0 = time.monotonic()
    try:
        c.assign([TopicPartition(topic, p, 0) for p in partitions])
        while seen < n and time.monotonic() - t0 < 600:  # hang guard
            for m in c.consume(10_000, timeout=1):
                if m.error() is None:
                    seen += 1
                elif len(errors) < 5:
                    errors.append(str(m.error()))
    finally:
        end = time.monotonic()
        c.close()
    return {"records": seen, "start": t0, "end": end, "errors": errors}


def _ready() -> None:
    print("ready", flush=True)
    sys.stdin.readline()


def main() -> None:
    role, bootstrap, topic, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    if role == "produce":
        out = produce(bootstrap, topic, n, int(sys.argv[5]), int(sys.argv[6]),
                      *(int(a) for a in sys.argv[7:9]))  # linger.ms, batch.size
    else:
        out = consume(bootstrap, topic, n, [int(p) for p in sys.argv[5].split(",")])
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
