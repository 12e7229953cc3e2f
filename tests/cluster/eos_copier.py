"""An exactly-once copier process (consume-transform-produce with confluent-kafka and
send_offsets_to_transaction), run under tests/support/supervised.py by test_eos_failover.py:
it starts from the group's committed offsets, prints {"progress": n} after each committed
transaction of n records and {"done": true} once every input partition is copied up to
--records-per-partition, then exits 0; any error ends the process (exit 1), to be restarted.

    python -m tests.cluster.eos_copier --bootstrap B --src IN --dst OUT --group G --txn-id T
        --partitions 3 --records-per-partition 500
"""

from __future__ import annotations

import argparse
import json
import sys

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition


def say(**msg: object) -> None:
    print(json.dumps(msg), flush=True)


def copy(a: argparse.Namespace) -> None:
    consumer = Consumer({
        "bootstrap.servers": a.bootstrap, "group.id": a.group,
        "isolation.level": "read_committed", "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100,
    })
    producer = Producer({
        "bootstrap.servers": a.bootstrap, "transactional.id": a.txn_id,
        "transaction.timeout.ms": 20000, "linger.ms": 5, "message.timeout.ms": 20000,
    })
    try:
        producer.init_transactions(30)  # fences a predecessor and aborts its transaction
        tps = [TopicPartition(a.src, p) for p in range(a.partitions)]
        committed = consumer.committed(tps, timeout=20)
        consumer.assign([TopicPartition(a.src, tp.partition, tp.offset if tp.offset >= 0 else -2)
                         for tp in committed])
        # position() is OFFSET_INVALID until a partition returns a record: a run that starts
        # with everything copied (its predecessor failed after its last commit) reads nothing,
        # and is done at its committed offsets
        start = {tp.partition: tp.offset for tp in committed}
        while True:
            msgs = [m for m in consumer.consume(200, 0.5) if m.error() is None]
            if not msgs:
                positions = consumer.position(consumer.assignment())
                if all(max(tp.offset, start[tp.partition]) >= a.records_per_partition
                       for tp in positions):
                    say(done=True)
                    return
                continue
            producer.begin_transaction()
            try:
                for m in msgs:
                    producer.produce(a.dst, m.value(), key=m.key(), partition=m.partition())
                producer.send_offsets_to_transaction(
                    consumer.position(consumer.assignment()),
                    consumer.consumer_group_metadata(), 30)
                producer.commit_transaction(30)
            except KafkaException:
                try:
                    producer.abort_transaction(10)
                except KafkaException:
                    pass
                raise
            say(progress=len(msgs))
    finally:
        consumer.close()
        producer.flush(5)


def main() -> int:
    ap = argparse.ArgumentParser()
    for opt in ("--bootstrap", "--src", "--dst", "--group", "--txn-id"):
        ap.add_argument(opt, required=True)
    ap.add_argument("--partitions", type=int, required=True)
    ap.add_argument("--records-per-partition", type=int, required=True)
    try:
        copy(ap.parse_args())
    except Exception as exc:  # the supervisor restarts us from the committed offsets
        print(f"copier failed: {exc!r}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
