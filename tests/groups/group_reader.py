"""tests/java/src/GroupReader.java with confluent-kafka (`group.protocol=consumer`): the same
arguments and the same lines on stdout (see there); runs until killed.

    python -m tests.groups.group_reader BOOTSTRAP TOPIC GROUP
"""

from __future__ import annotations

import json
import sys
import time

from confluent_kafka import Consumer, KafkaException, TopicPartition


def emit(**msg: object) -> None:
    print(json.dumps({"t": int(time.time() * 1000), **msg}), flush=True)


def main(bootstrap: str, topic: str, group: str) -> None:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "group.protocol": "consumer", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100})
    c.subscribe([topic])
    assigned: list[int] | None = None
    while True:
        msgs = [m for m in c.consume(20, 0.2) if m.error() is None]
        now = sorted(tp.partition for tp in c.assignment())
        if now != assigned:
            assigned = now
            emit(assigned=now)
        if not msgs:
            continue
        emit(read=[[m.partition(), m.offset(), m.value().decode()] for m in msgs])
        nxt = {m.partition(): m.offset() + 1 for m in msgs}
        try:
            c.commit(offsets=[TopicPartition(topic, p, o) for p, o in nxt.items()],
                     asynchronous=False)
            emit(committed=sorted(nxt.items()))
        except KafkaException as exc:
            emit(commit_failed=str(exc))


if __name__ == "__main__":
    main(*sys.argv[1:4])
