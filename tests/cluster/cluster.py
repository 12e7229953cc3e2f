"""N Samsa broker processes joined through a real ZooKeeper, for the cluster tests."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TypedDict

from confluent_kafka.admin import AdminClient

from samsa.broker.cluster.zk.process import ZooKeeperProcess
from tests.support.broker import BrokerProcess, free_port


class BrokerPlacement(TypedDict):
    host: str
    port: int
    command_prefix: Sequence[str]


# Small internal topics and fast failure detection (ZooKeeper's tick is 200 ms in the tests).
CLUSTER_SETTINGS: dict[str, object] = {
    "zookeeper.session.timeout.ms": 3000,
    "replica.lag.time.max.ms": 4000,
    "offsets.topic.num.partitions": 6,
    "transaction.state.log.num.partitions": 6,
    "group.initial.rebalance.delay.ms": 0,
    "group.min.session.timeout.ms": 1000,
    "transaction.state.log.min.isr": 2,
    # The last broker of a cluster to stop leads partitions nobody can take over: it retries
    # its controlled shutdown (as Kafka's does) before going; 2 x 0.5 s rather than 2 x 5 s.
    "controlled.shutdown.retry.backoff.ms": 500,
}


class Cluster:
    def __init__(
        self, zookeeper: ZooKeeperProcess, base: Path, size: int = 3, *,
        placement: Callable[[int], BrokerPlacement] | None = None, **settings: object
    ) -> None:
        """`placement(i)`, if given, says where broker i runs (host, port, command prefix):
        the chaos tests' partitions put each broker in its own network namespace."""
        self.chroot = f"samsa-{uuid.uuid4().hex[:8]}"
        merged = {
            **CLUSTER_SETTINGS,
            **settings,
            "zookeeper.connect": f"{zookeeper.connect_string}/{self.chroot}",
        }
        self.brokers = [
            BrokerProcess(base / f"broker{i}" / "data", broker_id=i, settings=merged,
                          name=f"broker{i}", **(placement(i) if placement else {}))
            for i in range(size)
        ]

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers if b.is_running())

    def start(self) -> Cluster:
        for b in self.brokers:
            b.start()
        wait_until(lambda: self.every_broker_sees({b.broker_id for b in self.brokers}), 20,
                   "every broker registered, as every broker sees it")
        return self

    def close(self) -> None:
        for b in self.brokers:
            b.close()

    def admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstrap})

    def live_broker_ids(self) -> set[int]:
        md = self.admin().list_topics(timeout=10)
        return set(md.brokers)

    def every_broker_sees(self, broker_ids: set[int]) -> bool:
        """Each running broker's own Metadata (asked directly) lists exactly `broker_ids`:
        their ZooKeeper caches may lag one another for a moment."""
        from tests.protocol.wire import WireClient

        for b in self.brokers:
            if not b.is_running():
                continue
            with WireClient(b.bootstrap) as w:
                seen = {x.node_id for x in w.call(3, 1, {"topics": []}).brokers}
            if seen != broker_ids:
                return False
        return True

    def leaders(self, topic: str) -> dict[int, int]:
        md = self.admin().list_topics(topic, timeout=10)
        return {p: pm.leader for p, pm in md.topics[topic].partitions.items()}

    def has_leaders(self, topic: str, partitions: int) -> bool:
        """Metadata lists all `partitions` of `topic`, each with a leader, on every running
        broker asked directly: a broker learns of a topic created elsewhere from a ZooKeeper
        watch a moment later, and a client may ask any of them next."""
        from tests.protocol.wire import WireClient

        leaders = self.leaders(topic)
        if len(leaders) != partitions or any(v < 0 for v in leaders.values()):
            return False
        for b in self.brokers:
            if not b.is_running():
                continue
            with WireClient(b.bootstrap) as w:
                md = w.call(3, 4, {"topics": [{"name": topic}],
                                   "allow_auto_topic_creation": False})
            known = [p for t in md.topics if t.name == topic and t.error_code == 0
                     for p in t.partitions if p.leader_id >= 0]
            if len(known) != partitions:
                return False
        return True

    def isr(self, topic: str) -> dict[int, list[int]]:
        md = self.admin().list_topics(topic, timeout=10)
        return {p: sorted(pm.isrs) for p, pm in md.topics[topic].partitions.items()}

    def broker(self, broker_id: int) -> BrokerProcess:
        return next(b for b in self.brokers if b.broker_id == broker_id)

    def log_sizes(self, topic: str, partition: int) -> dict[int, int]:
        """Bytes of the partition's segments on each broker that hosts it."""
        sizes = {}
        for b in self.brokers:
            d = b.data_dir / f"{topic}-{partition}"
            if d.is_dir():
                sizes[b.broker_id] = sum(f.stat().st_size for f in d.glob("*.log"))
        return sizes

    def logs_tail(self) -> str:
        return "\n".join(f"--- {b.name}\n{b.log_tail(40)}" for b in self.brokers)


def metrics_ports(cluster: Cluster) -> dict[int, int]:
    """Give each broker of a cluster not started yet a metrics.port of its own: id -> port."""
    ports = {}
    for b in cluster.brokers:
        ports[b.broker_id] = b.settings["metrics.port"] = free_port()
    return ports


@contextmanager
def running(cluster: Cluster) -> Iterator[Cluster]:
    """The cluster started, and closed after; its brokers' last log lines on a failure."""
    cluster.start()
    try:
        yield cluster
    except BaseException:
        print(cluster.logs_tail())
        raise
    finally:
        cluster.close()


def wait_until(cond: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            if cond():
                return
        except Exception as exc:  # the cluster may be between leaders
            last = exc
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}" + (f" (last error: {last!r})"
                                                           if last else ""))


# --------------------------------------------------------------------------- shared helpers
GROUP_KEY, TRANSACTION_KEY = 0, 1  # FindCoordinator key types


def create_topic(cluster: Cluster, topic: str, partitions: int, rf: int = 3,
                 **configs: str) -> None:
    """Create `topic` through AdminClient and wait until every partition has a leader."""
    from confluent_kafka.admin import NewTopic

    admin = cluster.admin()  # must outlive its futures
    fs = admin.create_topics([NewTopic(topic, partitions, rf, config=configs)],
                             operation_timeout=10)
    fs[topic].result(timeout=20)
    wait_until(lambda: cluster.has_leaders(topic, partitions), 20, "leaders")


def find_coordinators(cluster: Cluster, key_type: int, keys: list[str]) -> dict[str, int]:
    """FindCoordinator v4 (batched) through the first live broker: {key: node id}.

    Raises unless every key got a coordinator (the internal topic is created on first use)."""
    from tests.protocol.wire import WireClient

    first = next(b for b in cluster.brokers if b.is_running())
    with WireClient(first.bootstrap) as w:
        resp = w.call(10, 4, {"key_type": key_type, "coordinator_keys": keys})
    nodes = {c.key: c.node_id for c in resp.coordinators if c.error_code == 0}
    if len(nodes) != len(keys):
        raise AssertionError(f"FindCoordinator({key_type}) answered {resp}")
    return nodes


def coordinator_and_a_partition_elsewhere(cluster: Cluster, topic: str, txn: str
                                          ) -> tuple[int, int, int]:
    """(`txn`'s transaction coordinator, a partition of `topic` led by another broker, that
    partition's leader), once the coordinator is found."""
    wait_until(lambda: find_coordinators(cluster, TRANSACTION_KEY, [txn]), 20, "coordinator")
    coordinator = find_coordinators(cluster, TRANSACTION_KEY, [txn])[txn]
    p, leader = next((p, b) for p, b in sorted(cluster.leaders(topic).items())
                     if b != coordinator)
    return coordinator, p, leader
