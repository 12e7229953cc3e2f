"""The exactly-once copier of tests/java/src/TxnCopier.java with confluent-kafka, same
arguments and the same history on stdout (see there): one input partition, read_committed,
"copy:VALUE" to the same output partition, offsets in the transaction, every ABORT_EVERY-th
transaction aborted on purpose with "aborted:..." values, any error exits 1.

    python -m tests.cluster.history_copier BOOTSTRAP SRC DST PARTITION GROUP TXN_ID RECORDS
        ABORT_EVERY PACE_MS
"""

from __future__ import annotations

import json
import os
import sys
import time

from confluent_kafka import Consumer, Message, Producer, TopicPartition


def emit(**msg: object) -> None:
    print(json.dumps(msg), flush=True)


def main(argv: list[str]) -> int:
    bootstrap, src, dst, part, group, txn_id = argv[:6]
    partition, records, abort_every, pace_ms = int(part), *map(int, argv[6:9])
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed",
        "enable.auto.commit": False, "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100,
    })
    producer = Producer({
        "bootstrap.servers": bootstrap, "transactional.id": txn_id,
        "transaction.timeout.ms": 20000, "message.timeout.ms": 20000, "linger.ms": 5,
    })
    txn, writes = 0, []
    try:
        producer.init_transactions(30)
        tp = TopicPartition(src, partition)
        start = consumer.committed([tp], timeout=20)[0].offset
        consumer.assign([TopicPartition(src, partition, start if start >= 0 else -2)])
        while True:
            msgs = [m for m in consumer.consume(10, 0.2) if m.error() is None]
            if not msgs:
                if consumer.position([tp])[0].offset >= records:
                    emit(done=True)
                    return 0
                continue
            txn += 1
            abort = txn % abort_every == 0
            writes = []
            producer.begin_transaction()
            for m in msgs:
                v = (f"aborted:{txn_id}:{os.getpid()}:{txn}:{m.value().decode()}" if abort
                     else f"copy:{m.value().decode()}")
                w = [partition, None, v]
                writes.append(w)

                def acked(err: object, msg: Message, w: list = w) -> None:
                    if err is None:
                        w[1] = msg.offset()

                producer.produce(dst, v.encode(), partition=partition, on_delivery=acked)
            producer.flush(30)
            emit(txn=txn, writes=writes)
            if abort:
                producer.abort_transaction(30)
                emit(txn=txn, outcome="aborted")
                consumer.seek(TopicPartition(src, partition, msgs[0].offset()))
            else:
                producer.send_offsets_to_transaction(
                    [TopicPartition(src, partition, msgs[-1].offset() + 1)],
                    consumer.consumer_group_metadata(), 30)
                producer.commit_transaction(30)
                emit(txn=txn, outcome="ok", progress=len(msgs))
            time.sleep(pace_ms / 1000)
    except Exception as exc:  # the supervisor restarts us from the committed offsets
        if writes:
            emit(txn=txn, writes=writes)
        print(f"copier failed: {exc!r}", file=sys.stderr, flush=True)
        os._exit(1)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
