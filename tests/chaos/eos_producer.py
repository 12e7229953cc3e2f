"""A producer process of the cut-off workload (tests/chaos/cutoff.py), run under
tests/support/supervised.py (librdkafka can block past its own time-outs while a broker is cut
off: a run that makes no progress is killed and a new one started).

Two modes:

    idempotent     enable.idempotence, acks=all; each value is sent once and never resent
                   by the application, at --rate values a second over the topic's partitions
    transactional  small transactions (1..4 values), about --abort-share of them aborted

It reports on stdout, one JSON object a line, everything the checker needs:

    {"sent": [v, ...]}                               before the values are handed to librdkafka
    {"progress": 1, "ack": [p, o, v]}                 an idempotent value acknowledged at (p, o)
    {"progress": 1, "nack": v, "error": "..."}        an idempotent value that failed
    {"progress": 1, "txn": "ok"|"aborted"|"info", "acks": [[p, o, v], ...], "values": [...]}
    {"done": true}                                    once --stop-file exists and all is flushed

Values carry the process id, so the values of every run of the supervised worker differ.

    python -m tests.chaos.eos_producer --bootstrap B --topic T --partitions 6
        --mode idempotent|transactional --stop-file F [--txn-id ID] [--rate 150]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from pathlib import Path

from confluent_kafka import KafkaError, KafkaException, Message, Producer


def say(**msg: object) -> None:
    print(json.dumps(msg), flush=True)


def _error_name(exc: BaseException) -> str:
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return str(exc.args[0].name())
    return type(exc).__name__


def idempotent(a: argparse.Namespace) -> None:
    producer = Producer({
        "bootstrap.servers": a.bootstrap, "enable.idempotence": True, "acks": "all",
        "message.timeout.ms": 90000, "linger.ms": 5, "socket.timeout.ms": 10000,
    })

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        value = (msg.value() or b"").decode()
        if err is None:
            say(progress=1, ack=[msg.partition(), msg.offset(), value])
        else:
            say(progress=1, nack=value, error=err.name())

    stop, seq, period = Path(a.stop_file), 0, 1.0 / a.rate
    next_at = time.monotonic()
    while not stop.exists():
        value = f"i-{os.getpid()}-{seq}"
        say(sent=[value])
        producer.produce(a.topic, value.encode(), partition=seq % a.partitions,
                         on_delivery=on_delivery)
        seq += 1
        next_at += period
        producer.poll(max(0.0, next_at - time.monotonic()))
    while producer.flush(5) > 0:  # the supervisor kills a run that hangs here
        pass
    say(done=True)


def transactional(a: argparse.Namespace) -> None:
    rng = random.Random(os.getpid())
    producer = _txn_producer(a)
    stop, n = Path(a.stop_file), 0
    while not stop.exists():
        values = [f"t-{os.getpid()}-{n}-{k}" for k in range(rng.randint(1, 4))]
        n += 1
        abort = rng.random() < a.abort_share
        outcome, acks = _transaction(producer, a, values, abort, rng)
        say(progress=1, txn=outcome, acks=acks, values=values)
        if outcome == "info":  # fatal or unknown: a new producer fences the old one
            producer = _txn_producer(a)
        time.sleep(a.txn_pause)
    say(done=True)


def _txn_producer(a: argparse.Namespace) -> Producer:
    producer = Producer({
        "bootstrap.servers": a.bootstrap, "transactional.id": a.txn_id,
        "transaction.timeout.ms": 20000, "message.timeout.ms": 20000, "linger.ms": 2,
        "socket.timeout.ms": 10000,
    })
    producer.init_transactions(60)
    return producer


def _transaction(producer: Producer, a: argparse.Namespace, values: list[str], abort: bool,
                 rng: random.Random) -> tuple[str, list[list[object]]]:
    """Send `values` in one transaction; (outcome, acknowledged [p, o, v])."""
    acks: list[list[object]] = []

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        if err is None:
            acks.append([msg.partition(), msg.offset(), (msg.value() or b"").decode()])

    say(sent=values)
    committing = False
    try:
        producer.begin_transaction()
        for v in values:
            producer.produce(a.topic, v.encode(), partition=rng.randrange(a.partitions),
                             on_delivery=on_delivery)
        if producer.flush(30) > 0:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "flush"))
        if abort:
            producer.abort_transaction(30)
            return "aborted", acks
        committing = True
        producer.commit_transaction(30)
        return "ok", acks
    except KafkaException as exc:
        err = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
        say(error=_error_name(exc), committing=committing)
        if err is not None and err.txn_requires_abort():
            try:
                producer.abort_transaction(30)
                # Abort is certain only where no EndTxn(commit) may have been written.
                return "info" if committing else "aborted", acks
            except KafkaException:
                pass
        return "info", acks


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--partitions", type=int, required=True)
    ap.add_argument("--mode", choices=["idempotent", "transactional"], required=True)
    ap.add_argument("--stop-file", required=True)
    ap.add_argument("--txn-id", default="")
    ap.add_argument("--rate", type=float, default=150.0)
    ap.add_argument("--abort-share", type=float, default=0.25)
    ap.add_argument("--txn-pause", type=float, default=0.1)
    a = ap.parse_args()
    (idempotent if a.mode == "idempotent" else transactional)(a)


if __name__ == "__main__":
    main()
