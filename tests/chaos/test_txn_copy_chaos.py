"""Workload 1, short form: Kafka's transactions system test recipe with Kafka's own tools
(VerifiableProducer, TransactionalMessageCopier, read_committed VerifiableConsumer) on a
3-broker cluster, single-partition topics (so order is checked too), every broker bounced
with kill -9, the copier bounced with kill -9, and the copier's transaction coordinator
(caught in PrepareCommit/PrepareAbort where possible) and group coordinator killed while it
copies. It runs twice on the TV2-finalized cluster: with the copier on kafka-clients 4.3
(transactions v2) and on kafka-clients 3.9 (transactions v1, a shorter copy); the output's
markers show which one each spoke. `make chaos` runs the long form (tests/chaos/run.py)."""

from __future__ import annotations

import os

import pytest

from samsa.protocol.records import iter_batches
from tests.chaos.txn_copy import CopyParams, run_copy
from tests.cluster.cluster import Cluster

pytestmark = pytest.mark.timeout(600)


def _marker_epochs(cluster: Cluster, topic: str) -> list[tuple[int, int]]:
    """(producer id, epoch) of every control batch of topic-0, from the replica with most."""
    best: list[tuple[int, int]] = []
    for b in cluster.brokers:
        found = []
        for seg in sorted((b.data_dir / f"{topic}-0").glob("*.log")):
            buf = seg.read_bytes()
            found += [(h.producer_id, h.producer_epoch) for _, h in iter_batches(buf)
                      if h.is_control]
        best = max(best, found, key=len)
    return best


@pytest.mark.parametrize("clients", ["kafka4", "clients39"])
def test_transactional_copy_under_hard_bounces(chaos_cluster, tmp_path, clients):
    records = (os.environ.get("CHAOS_COPY_SHORT_RECORDS", "20000") if clients == "kafka4"
               else os.environ.get("CHAOS_COPY_SHORT_TV1_RECORDS", "8000"))
    p = CopyParams(records=int(records), partitions=1, hard=True, bounce_rounds=1,
                   seed=int(os.environ.get("CHAOS_SEED", "1")), copier_clients=clients)
    res = run_copy(chaos_cluster, p, tmp_path / "copy")
    print(res.text)
    assert res.ok, res.text
    # the faults happened during the copy (each is scheduled at a share of the copy's progress)
    assert res.faults["broker_kill"] >= 1 and res.faults["copier_kill"] >= 1, res.text
    assert res.faults["coordinator_kill"] >= 1, res.text
    # One marker per transaction (one output partition). Transactions v2 bumps the epoch at
    # every EndTxn: markers share an epoch only where one was written again (a coordinator
    # failover resends them). Transactions v1 keeps it from InitProducerId to
    # InitProducerId (a copier restart, a fencing): most markers share theirs.
    epochs = _marker_epochs(chaos_cluster, res.output_topic)
    print(f"{len(epochs)} markers, {len(set(epochs))} distinct (producer id, epoch)")
    assert len(epochs) >= p.records // p.transaction_size, (len(epochs), res.text)
    if clients == "kafka4":
        assert len(set(epochs)) >= len(epochs) * 9 // 10, epochs
    else:
        assert len(set(epochs)) <= len(epochs) // 3, epochs
