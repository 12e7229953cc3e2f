"""Issue 9 acceptance: the endpoint is scraped during a transactional workload and the
transaction, group, partition and process metrics move with the right values."""

from __future__ import annotations

import json
import re
import time
import urllib.request
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from prometheus_client import REGISTRY

from samsa.broker import metrics
from tests.support.broker import REPO_ROOT, free_port
from tests.transactions.clients import create_topic, txn_producer, unique

pytestmark = pytest.mark.timeout(240)

TXN = "kafka_coordinator_transaction_transactioncoordinator"
COMMITS = f"{TXN}_commits_total"
ABORTS = f"{TXN}_aborts_total"
TIMED_OUT = f"{TXN}_timedoutaborts_total"
MARKERS = "kafka_coordinator_transaction_transactionmarkerchannelmanager_markerlatencyms"
BY_STATE = "kafka_coordinator_transaction_transactionstatemanager_numtransactions"
GROUPS = "kafka_coordinator_group_groupmetadatamanager"


def exposition(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        return resp.read().decode()


def scrape(port: int) -> dict[str, float]:
    """`name{labels}` -> value, for every sample line of the exposition."""
    out: dict[str, float] = {}
    for line in exposition(port).splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            out[key] = float(value)
    return out


def value(samples: dict[str, float], name: str, **labels: str) -> float:
    """The one sample of `name` whose labels include `labels` (KeyError-like failure if none)."""
    found = [
        v
        for key, v in samples.items()
        if key.split("{", 1)[0] == name and all(f'{k}="{x}"' in key for k, x in labels.items())
    ]
    assert len(found) == 1, f"{name} {labels}: {len(found)} samples"
    return found[0]


def verification_samples() -> tuple[float, float]:
    """KIP-890 verifications timed and partitions refused by the brokers of this process (an
    embedded broker's or the handler tests' metrics are the process's registry)."""
    def sample(name: str) -> float:
        return REGISTRY.get_sample_value(name) or 0.0
    return (sample("kafka_server_addpartitionstotxnmanager_verificationtimems_count"),
            sample("kafka_server_addpartitionstotxnmanager_verificationfailurerate_total"))


def wait_for(port: int, check: Callable[[dict[str, float]], bool], timeout: float = 30):
    """Scrape until `check` holds (markers are written after EndTxn is answered)."""
    deadline = time.monotonic() + timeout
    while True:
        samples = scrape(port)
        if check(samples):
            return samples
        if time.monotonic() > deadline:
            raise AssertionError("metrics never reached the expected values")
        time.sleep(0.1)


def test_transaction_metrics_count_commits_and_aborts(broker_factory):
    port = free_port()
    b = broker_factory(
        {
            "metrics.port": port,
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": 300,
            "group.initial.rebalance.delay.ms": 0,
        }
    )
    bs = b.bootstrap
    topic, txn_id = unique("metrics-txn")
    create_topic(bs, topic, partitions=2)
    before = scrape(port)
    assert value(before, COMMITS) == 0 and value(before, ABORTS) == 0

    p = txn_producer(bs, txn_id)
    p.init_transactions(20)
    plan = [True, False, True, True, False, True, False, True]  # commit?
    commits = aborts = 0
    last = (0.0, 0.0)
    for i, commit in enumerate(plan):
        p.begin_transaction()
        for n in range(10):
            p.produce(topic, value=f"{i}-{n}".encode(), partition=n % 2)
        assert p.flush(20) == 0
        if i == 0:  # records of an open transaction are held back from read_committed
            open_ = scrape(port)
            assert value(open_, BY_STATE, state="Ongoing") == 1
            assert value(open_, "samsa_partition_last_stable_offset_lag", topic=topic,
                         partition="0") == 5
        if commit:
            p.commit_transaction(20)
            commits += 1
        else:
            p.abort_transaction(20)
            aborts += 1
        want = (commits, aborts)
        s = wait_for(port, lambda s, w=want: (value(s, COMMITS), value(s, ABORTS)) == w)
        now = (value(s, COMMITS), value(s, ABORTS))
        assert now >= last  # counters never move back
        last = now

    s = scrape(port)
    assert value(s, COMMITS) == commits == 5
    assert value(s, ABORTS) == aborts == 3
    assert value(s, TIMED_OUT) == 0
    assert value(s, f"{MARKERS}_count", result="commit") == commits
    assert value(s, f"{MARKERS}_count", result="abort") == aborts
    assert value(s, BY_STATE, state="Ongoing") == 0
    # the last transaction was committed
    assert value(s, BY_STATE, state="CompleteCommit") == 1
    for partition in ("0", "1"):
        assert value(s, "samsa_partition_last_stable_offset_lag", topic=topic,
                     partition=partition) == 0

    # A transaction left open past its timeout is aborted by the coordinator.
    hung = txn_producer(bs, f"{txn_id}-hung", **{"transaction.timeout.ms": 1000})
    hung.init_transactions(20)
    hung.begin_transaction()
    hung.produce(topic, value=b"hung", partition=0)
    assert hung.flush(20) == 0
    s = wait_for(port, lambda s: value(s, TIMED_OUT) == 1 and value(s, ABORTS) == aborts + 1)
    assert value(s, COMMITS) == commits
    assert value(s, BY_STATE, state="CompleteAbort") == 1
    assert value(s, BY_STATE, state="Ongoing") == 0
    assert value(s, "samsa_partition_last_stable_offset_lag", topic=topic, partition="0") == 0
    hung.purge()
    p.purge()


def test_group_partition_and_process_metrics(broker_factory):
    port = free_port()
    b = broker_factory({"metrics.port": port, "group.initial.rebalance.delay.ms": 0})
    bs = b.bootstrap
    topic, _ = unique("metrics-group")
    group = f"{topic}-g"
    create_topic(bs, topic, partitions=2)
    prod = Producer({"bootstrap.servers": bs})
    for n in range(20):
        prod.produce(topic, value=b"v", partition=n % 2)
    assert prod.flush(20) == 0

    c = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    deadline = time.monotonic() + 60
    while not c.assignment():
        assert time.monotonic() < deadline, "no assignment"
        c.poll(0.2)
    c.commit(offsets=[TopicPartition(topic, 0, 3), TopicPartition(topic, 1, 10)],
             asynchronous=False)
    s = scrape(port)
    assert value(s, f"{GROUPS}_numgroupsstable") == 1
    assert value(s, f"{GROUPS}_numgroups") == 1
    assert value(s, f"{GROUPS}_numoffsets") == 2
    assert value(s, "kafka_consumergroup_current_offset", consumergroup=group, topic=topic,
                 partition="0") == 3
    assert value(s, "kafka_consumergroup_lag", consumergroup=group, topic=topic,
                 partition="0") == 10 - 3
    assert value(s, "kafka_consumergroup_lag", consumergroup=group, topic=topic,
                 partition="1") == 0
    assert value(s, "kafka_consumergroup_lag_sum", consumergroup=group, topic=topic) == 7
    c.close()
    s = wait_for(port, lambda s: value(s, f"{GROUPS}_numgroupsempty") == 1)
    assert value(s, f"{GROUPS}_numgroupsstable") == 0

    # partitions: this broker leads everything (and __consumer_offsets' partitions too)
    assert value(s, "kafka_server_replicamanager_partitioncount") >= 2
    assert value(s, "kafka_server_replicamanager_leadercount") == value(
        s, "kafka_server_replicamanager_partitioncount"
    )
    assert value(s, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert value(s, "kafka_server_replicamanager_underminisrpartitioncount") == 0
    assert value(s, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert value(s, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    assert value(s, "kafka_controller_kafkacontroller_globalpartitioncount") == value(
        s, "kafka_server_replicamanager_partitioncount"
    )
    assert value(s, "kafka_server_replicamanager_isrshrinks_total") == 0
    # prometheus_client's process collector: memory and descriptors of the broker process
    assert value(s, "process_resident_memory_bytes") > 10_000_000
    assert value(s, "process_open_fds") > 5
    assert value(s, "process_max_fds") >= value(s, "process_open_fds")

    # every metric the sample Grafana dashboard queries is one the broker exposes
    declared = {
        re.sub(r"_total$", "", name)
        for name in re.findall(r"^# TYPE (\w+) ", exposition(port), re.M)
    }
    dashboard = json.loads((REPO_ROOT / "docs" / "grafana-samsa.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    queried = {
        re.sub(r"_(total|bucket)$", "", name)
        for expr in exprs
        for name in re.findall(r"\b((?:kafka|samsa|process)_\w+)\{", expr)
    }
    assert len(queried) > 30
    assert queried <= declared, sorted(queried - declared)


def test_isr_changed_counts_shrinks_and_expands():
    shrinks = metrics.ISR_SHRINKS._value.get()
    expands = metrics.ISR_EXPANDS._value.get()
    metrics.isr_changed([1, 2, 3], [1, 2])
    metrics.isr_changed([1, 2], [1, 2, 3])
    metrics.isr_changed([1, 2], [1, 2])
    assert metrics.ISR_SHRINKS._value.get() == shrinks + 1
    assert metrics.ISR_EXPANDS._value.get() == expands + 1


def test_log_flush_time_is_observed(broker_factory):
    from confluent_kafka.admin import AdminClient, NewTopic

    port = free_port()
    b = broker_factory({"metrics.port": port})
    topic, _ = unique("metrics-flush")
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    fs = admin.create_topics([NewTopic(topic, 1, 1, config={"flush.ms": "100"})])
    fs[topic].result(timeout=20)
    flushes = "kafka_log_logflushstats_logflushrateandtimems"
    before = value(scrape(port), f"{flushes}_count")
    prod = Producer({"bootstrap.servers": b.bootstrap})
    prod.produce(topic, value=b"to disk")
    assert prod.flush(20) == 0
    s = wait_for(port, lambda s: value(s, f"{flushes}_count") > before)
    assert value(s, f"{flushes}_sum") >= 0
