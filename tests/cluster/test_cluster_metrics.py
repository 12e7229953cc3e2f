"""Cluster metrics: under-replicated and offline partitions, ISR expands, the active
controller, each broker scraped on its own metrics.port."""

from __future__ import annotations

import pytest

from tests.cluster.cluster import Cluster, create_topic, metrics_ports, running, wait_until
from tests.observability.test_txn_metrics import scrape, value

pytestmark = pytest.mark.timeout(240)

RM = "kafka_server_replicamanager"
KC = "kafka_controller_kafkacontroller"


def test_under_replicated_offline_and_isr_expand(zookeeper, tmp_path):
    c = Cluster(zookeeper, tmp_path)
    ports = metrics_ports(c)
    with running(c):
        _check(c, ports)


def _check(c: Cluster, ports: dict[int, int]) -> None:
    def live_scrapes() -> dict[int, dict[str, float]]:
        return {i: scrape(p) for i, p in ports.items() if c.broker(i).is_running()}

    def total(name: str) -> float:
        return sum(value(s, name) for s in live_scrapes().values())

    wait_until(lambda: total(f"{KC}_activecontrollercount") == 1, 20, "one active controller")
    create_topic(c, "replicated", 1, rf=3)
    create_topic(c, "single", 1, rf=1)
    wait_until(lambda: c.isr("replicated")[0] == [0, 1, 2], 20, "full ISR")
    assert total(f"{RM}_underreplicatedpartitions") == 0
    assert total(f"{KC}_offlinepartitionscount") == 0

    leader = c.leaders("replicated")[0]
    victim = c.leaders("single")[0]
    if victim == leader:  # take down a follower of "replicated", keep its leader
        victim = next(i for i in ports if i != leader)
    c.broker(victim).kill9()
    # the controller (wherever it is now) drops the victim from the ISR
    wait_until(lambda: value(scrape(ports[leader]), f"{RM}_underreplicatedpartitions") >= 1,
               60, "the leader reports an under-replicated partition")
    single_offline = c.leaders("single")[0] in (victim, -1)
    if single_offline:
        wait_until(lambda: total(f"{KC}_offlinepartitionscount") >= 1, 60,
                   "the controller reports the offline partition")
    assert total(f"{KC}_activecontrollercount") == 1

    expands = value(scrape(ports[leader]), f"{RM}_isrexpands_total")
    c.broker(victim).start()
    wait_until(lambda: c.isr("replicated")[0] == [0, 1, 2], 60, "the victim back in the ISR")
    wait_until(lambda: value(scrape(ports[leader]), f"{RM}_underreplicatedpartitions") == 0,
               30, "no under-replicated partition")
    # The leader counts the expand once its ZooKeeper write returns, which may be after the
    # store's watch has already shown everyone the new ISR: wait for the count too.
    wait_until(lambda: value(scrape(ports[leader]), f"{RM}_isrexpands_total") >= expands + 1,
               30, "the leader counts the ISR expand")
    wait_until(lambda: total(f"{KC}_offlinepartitionscount") == 0, 60, "nothing offline")
