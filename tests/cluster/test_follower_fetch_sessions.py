"""Followers fetch in incremental fetch sessions (KIP-227), as Kafka's do: each broker's
replica fetcher holds one session with each leader it follows (a leader's metrics count it,
with all the partitions followed from it), every record reaches every replica, and after a
follower is killed and restarted it opens a new session and catches up (the dead one's session
stays in the leader's cache until a new one needs its place, as in Kafka's)."""

from __future__ import annotations

import pytest

from tests.cluster.cluster import Cluster, create_topic, metrics_ports, running, wait_until
from tests.cluster.test_replication import _produce
from tests.observability.test_txn_metrics import scrape, value

pytestmark = pytest.mark.timeout(240)

PARTITIONS = 12
SESSIONS = "kafka_server_fetchsessioncache_numincrementalfetchsessions"
CACHED = "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached"


def test_followers_fetch_in_sessions(zookeeper, tmp_path):
    c = Cluster(zookeeper, tmp_path, size=2)
    ports = metrics_ports(c)
    with running(c):
        _check(c, ports)


def _check(c: Cluster, ports: dict[int, int]) -> None:
    create_topic(c, "s", PARTITIONS, rf=2)
    wait_until(lambda: all(len(isr) == 2 for isr in c.isr("s").values()), 30, "full ISRs")
    _produce(c.bootstrap, "s", [b"v%d" % i for i in range(240)], PARTITIONS)
    _replicated(c)

    def led_by(broker: int) -> int:
        return sum(1 for leader in c.leaders("s").values() if leader == broker)

    def sessions_held() -> bool:
        # (no consumer fetches here: every session is the other broker's replica fetcher)
        for broker, port in ports.items():
            samples = scrape(port)
            if led_by(broker) and (value(samples, SESSIONS) != 1
                                   or value(samples, CACHED) != led_by(broker)):
                return False
        return True

    wait_until(sessions_held, 30, "one follower session on each leader, of its partitions")
    held_before = value(scrape(ports[1]), CACHED)

    # A follower killed and restarted opens a session again (its old one is unknown to it)
    # and the records written meanwhile reach it.
    c.broker(0).kill9()
    wait_until(lambda: all(leader == 1 for leader in c.leaders("s").values()), 60,
               "broker 1 leads every partition")
    _produce(c.bootstrap, "s", [b"w%d" % i for i in range(120)], PARTITIONS)
    c.broker(0).start()
    wait_until(lambda: all(len(isr) == 2 for isr in c.isr("s").values()), 60,
               "broker 0 back in every ISR")
    _replicated(c)
    wait_until(lambda: (value(scrape(ports[1]), SESSIONS), value(scrape(ports[1]), CACHED))
               == (1 + (held_before > 0), held_before + PARTITIONS), 30,
               "the restarted follower's session")


def _replicated(c: Cluster) -> None:
    def same_logs() -> bool:
        return all(len(set(c.log_sizes("s", p).values())) == 1 for p in range(PARTITIONS))

    wait_until(same_logs, 60, "every replica's log the same size")
