"""Uniform group-member wrappers over kafka-python, aiokafka and confluent-kafka."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

FAST = {
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 1000,
    "offsets.topic.num.partitions": 10,
}
SESSION_MS = 4000


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        admin.close()


def produce(bootstrap: str, topic: str, partitions: int, n: int, start: int = 0) -> None:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(start, start + n):
        p.send(topic, f"v{i}".encode(), partition=i % partitions)
    p.flush()
    p.close()


def _kafka_python_subscribe(consumer, topic: str) -> None:  # noqa: ANN001
    """Subscribe a kafka-python consumer so that its first rebalance is its only one.

    kafka-python 3.0.x compares the metadata snapshot its leader assigned with against the
    current one and rejoins when they differ. Subscribing alone leaves that snapshot empty
    until the next metadata response, which often lands after the first JoinGroup: the leader
    assigns with an empty snapshot (or no partitions at all: "No partition metadata for
    topic") and rejoins some 100 ms later. That rejoin is only driven while need_rejoin() is
    true, and need_rejoin() turns false as soon as the leader performs the new assignment; if
    poll(timeout) gives up while that JoinGroup/SyncGroup is in flight, no later poll collects
    the finished join: heartbeats stay disabled, the assignment stays empty, and the
    coordinator rightly expires the member after session.timeout.ms.

    topics() always fetches metadata and, after subscribe(), the consumer's metadata listener
    records the snapshot for the subscribed topic, so the first assignment uses the final
    snapshot. (Membership-driven rejoins set rejoin_needed, which stays true until the join is
    collected, and are not affected.)"""
    consumer.subscribe([topic])
    deadline = time.monotonic() + 30
    while topic not in consumer.topics():
        if time.monotonic() > deadline:
            raise AssertionError(f"kafka-python does not see topic {topic}")
        time.sleep(0.1)


class _Loop:
    _loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    def run(cls, coro):  # noqa: ANN001, ANN206
        if cls._loop is None:
            cls._loop = asyncio.new_event_loop()
            threading.Thread(target=cls._loop.run_forever, daemon=True).start()
        return asyncio.run_coroutine_threadsafe(coro, cls._loop).result(30)


class Member:
    """One group member, polled continuously by its own thread (a JoinGroup may block a
    client's poll until the whole group rejoins, so members must not share a thread).

    `seen` collects the values read; `assignment()` is {(topic, partition)}."""

    def __init__(self, client: str, bootstrap: str, group: str, topic: str,
                 instance_id: str | None = None) -> None:
        self.client = client
        self.topic = topic
        self.seen: list[str] = []
        self._assignment: set[tuple[str, int]] = set()
        self._requests: list[tuple[str, threading.Event]] = []
        self._stop = False
        self.error: BaseException | None = None
        if client == "kafka-python":
            from kafka import KafkaConsumer

            kw = {"group_instance_id": instance_id} if instance_id else {}
            self.c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                                   auto_offset_reset="earliest", enable_auto_commit=False,
                                   session_timeout_ms=SESSION_MS, heartbeat_interval_ms=300,
                                   max_poll_interval_ms=60000, **kw)
            _kafka_python_subscribe(self.c, topic)
        elif client == "confluent-kafka":
            from confluent_kafka import Consumer

            conf = {"bootstrap.servers": bootstrap, "group.id": group,
                    "auto.offset.reset": "earliest", "enable.auto.commit": False,
                    "session.timeout.ms": SESSION_MS, "heartbeat.interval.ms": 300}
            if instance_id:
                conf["group.instance.id"] = instance_id
            self.c = Consumer(conf)
            self.c.subscribe([topic])
        elif client == "aiokafka":
            from aiokafka import AIOKafkaConsumer

            async def make():  # noqa: ANN202
                c = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                     auto_offset_reset="earliest", enable_auto_commit=False,
                                     session_timeout_ms=SESSION_MS, heartbeat_interval_ms=300)
                await c.start()
                return c

            self.c = _Loop.run(make())
        else:
            raise ValueError(client)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop:
                self.seen.extend(self._poll(0.1))
                self._assignment = self._current_assignment()
                while self._requests:
                    what, done = self._requests.pop(0)
                    if what == "commit":
                        self._commit()
                    done.set()
        except BaseException as exc:  # surfaced by the test through `error`
            self.error = exc

    def _poll(self, timeout: float) -> list[str]:
        if self.client == "kafka-python":
            batches = self.c.poll(int(timeout * 1000))
            return [r.value.decode() for recs in batches.values() for r in recs]
        if self.client == "confluent-kafka":
            return [m.value().decode() for m in self.c.consume(100, timeout)
                    if m.error() is None]
        batches = _Loop.run(self.c.getmany(timeout_ms=int(timeout * 1000)))
        return [r.value.decode() for recs in batches.values() for r in recs]

    def _current_assignment(self) -> set[tuple[str, int]]:
        return {(tp.topic, tp.partition) for tp in self.c.assignment()}

    def _commit(self) -> None:
        if self.client == "kafka-python":
            self.c.commit()
        elif self.client == "confluent-kafka":
            self.c.commit(asynchronous=False)
        else:
            _Loop.run(self.c.commit())

    def assignment(self) -> set[tuple[str, int]]:
        if self.error is not None:
            raise AssertionError(f"{self.client} member failed: {self.error!r}")
        return self._assignment

    def commit(self) -> None:
        done = threading.Event()
        self._requests.append(("commit", done))
        assert done.wait(30), "commit did not complete"
        if self.error is not None:
            raise AssertionError(f"{self.client} commit failed: {self.error!r}")

    def close(self) -> None:
        self._stop = True
        self._thread.join(30)
        if self.client == "aiokafka":
            _Loop.run(self.c.stop())
        else:
            self.c.close()


def poll_until(members: list[Member], cond: Callable[[], bool], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError(
        f"condition not met in {timeout}s; assignments: {[sorted(m.assignment()) for m in members]}"
    )


def seen(members: list[Member]) -> list[str]:
    return [v for m in members for v in m.seen]


def split_evenly(members: list[Member], partitions: int) -> Callable[[], bool]:
    def cond() -> bool:
        sets = [m.assignment() for m in members]
        union = set().union(*sets)
        return (len(union) == partitions and sum(map(len, sets)) == partitions
                and all(sets))
    return cond
