"""The Kafka Streams application tests/java/src/StreamsCount.java, its input and its output.

    classes = compile_streams_app()
    app = streams_app(classes, bootstrap, app_id, INPUT, OUTPUT, tmp_path / "a", name="a")
    feed(bootstrap, INPUT, range(EVENTS))          # KEYS x events, values "k00".."k<KEYS-1>"
    reader = CountReader(bootstrap, OUTPUT)        # read_committed
    reader.wait_complete(EVENTS, 90, on_timeout)   # every key's count reached EVENTS
    assert reader.bad_sequences(EVENTS) == {}      # each key's output is exactly 1, 2, ..., n

The application counts input records per key through a repartition topic and a changelog
store, exactly_once_v2, with its record cache off: each input record makes one output record
(key, new count). So the read_committed output of a key must be exactly 1, 2, ..., EVENTS: a
repeated count is a record counted twice, a gap a record lost.
"""

from __future__ import annotations

import struct
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from tests.support.java import JAVA_SRC, JavaProcess, compile_java

KEYS = 20


def key_name(i: int) -> str:
    return f"k{i:02d}"


def compile_streams_app(classpath: str = "kafka4") -> Path:
    return compile_java([JAVA_SRC / "StreamsCount.java"], classpath=classpath)


def streams_app(
    classes: Path, bootstrap: str, app_id: str, input_topic: str, output_topic: str,
    state_dir: Path, *, replication: int = -1, threads: int = 2, name: str = "streams",
    classpath: str = "kafka4", configs: dict[str, str] | None = None,
) -> JavaProcess:
    """`configs`: Streams configs set on the command line (StreamsCount's -Dstreams.NAME)."""
    state_dir.mkdir(parents=True, exist_ok=True)
    return JavaProcess(
        "StreamsCount",
        [bootstrap, app_id, input_topic, output_topic, str(state_dir), str(replication),
         str(threads)],
        log_path=state_dir.parent / f"{name}.log",
        classpath=classpath,
        extra_classpath=[classes],
        jvm_args=[f"-Dstreams.{k}={v}" for k, v in (configs or {}).items()],
        name=name,
    )


def feed(bootstrap: str, topic: str, events: Iterable[int], *, pause: float = 0.0,
         acked: Callable[[int], None] = lambda j: None) -> int:
    """For each event number j, one record per key: record key "e<j>-<i>", value key_name(i).
    Idempotent and acks=all, so the input holds each record exactly once. `acked(j)` is
    called once every record of events up to j is acknowledged. Returns the record count."""
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                  "linger.ms": 5, "message.timeout.ms": 60000})
    errors: list[str] = []

    pending: dict[int, int] = {}  # event -> records not yet acknowledged
    order: list[int] = []

    def on_delivery(err, msg) -> None:
        if err is not None:
            errors.append(str(err))
            return
        j = int(msg.key().decode()[1:].split("-")[0])
        pending[j] -= 1
        while order and pending[order[0]] == 0:
            acked(order.pop(0))

    n = 0
    for j in events:
        pending[j] = KEYS
        order.append(j)
        for i in range(KEYS):
            p.produce(topic, key_name(i).encode(), key=f"e{j}-{i}".encode(),
                      on_delivery=on_delivery)
            n += 1
        p.poll(0)
        if pause:
            time.sleep(pause)
    left = p.flush(90)
    assert left == 0 and not errors, f"input not acknowledged: {left} left, errors {errors[:5]}"
    return n


class CountReader:
    """A read_committed consumer of the application's output (String key, Long value) that
    keeps every count each key had, in order."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.counts: dict[str, list[int]] = defaultdict(list)
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": f"check-{topic}",
            "isolation.level": "read_committed", "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        })
        self.consumer.assign([TopicPartition(topic, p, -2) for p in range(partitions)])
        self.errors: list[str] = []

    def poll(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for m in self.consumer.consume(1000, 0.2):
                if m.error() is not None:
                    self.errors.append(str(m.error()))
                    continue
                (value,) = struct.unpack(">q", m.value())
                self.counts[m.key().decode()].append(value)

    def complete(self, events: int) -> bool:
        return (len(self.counts) == KEYS
                and all(v and v[-1] >= events for v in self.counts.values()))

    def records(self) -> int:
        return sum(map(len, self.counts.values()))

    def wait_for(self, done: Callable[[], bool], timeout: float, what: str,
                 alive: Callable[[], str | None] = lambda: None) -> None:
        """Read until `done()`. Raises AssertionError on timeout or when `alive()` returns a
        reason to stop."""
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() > deadline:
                raise AssertionError(f"no {what} after {timeout:.0f} s: {self.summary()}")
            why = alive()
            if why:
                raise AssertionError(f"{why}; output so far: {self.summary()}")
            self.poll(0.5)

    def wait_complete(self, events: int, timeout: float,
                      alive: Callable[[], str | None] = lambda: None) -> None:
        """Read until every key's count reached `events`, then 2 s more for any extra."""
        self.wait_for(lambda: self.complete(events), timeout, "complete output", alive)
        self.poll(2.0)

    def bad_sequences(self, events: int) -> dict[str, list[int]]:
        """Keys whose committed counts are not exactly 1, 2, ..., events."""
        want = list(range(1, events + 1))
        bad = {key_name(i): self.counts.get(key_name(i), []) for i in range(KEYS)}
        return {k: v for k, v in bad.items() if v != want}

    def summary(self) -> str:
        last = {k: v[-1] for k, v in sorted(self.counts.items())}
        return f"{self.records()} records, last count per key {last}"

    def close(self) -> None:
        self.consumer.close()


def describe_bad(bad: dict[str, list[int]], events: int) -> str:
    """Duplicated and missing counts of each bad key, briefly."""
    parts = []
    for k, seq in sorted(bad.items()):
        seen: dict[int, int] = defaultdict(int)
        for v in seq:
            seen[v] += 1
        dups = sorted(v for v, n in seen.items() if n > 1)
        missing = sorted(set(range(1, events + 1)) - set(seen))
        extra = sorted(v for v in seen if not 1 <= v <= events)
        parts.append(f"{k}: {len(seq)} records, repeated {dups[:10]}, missing {missing[:10]}, "
                     f"out of range {extra[:10]}")
    return "; ".join(parts)
