"""Workload 1, short form: Kafka's transactions system test recipe with Kafka's own tools
(VerifiableProducer, TransactionalMessageCopier, read_committed VerifiableConsumer) on a
3-broker cluster, single-partition topics (so order is checked too), every broker bounced
with kill -9, the copier bounced with kill -9, and the copier's transaction coordinator
(caught in PrepareCommit/PrepareAbort where possible) and group coordinator killed while it
copies. `make chaos` runs the long
form (tests/chaos/run.py)."""

from __future__ import annotations

import os

import pytest

from tests.chaos.txn_copy import CopyParams, run_copy

pytestmark = pytest.mark.timeout(600)


def test_transactional_copy_under_hard_bounces(chaos_cluster, tmp_path):
    p = CopyParams(records=int(os.environ.get("CHAOS_COPY_SHORT_RECORDS", "20000")),
                   partitions=1, hard=True, bounce_rounds=1,
                   seed=int(os.environ.get("CHAOS_SEED", "1")))
    res = run_copy(chaos_cluster, p, tmp_path / "copy")
    print(res.text)
    assert res.ok, res.text
    # the faults happened during the copy (each is scheduled at a share of the copy's progress)
    assert res.faults["broker_kill"] >= 1 and res.faults["copier_kill"] >= 1, res.text
    assert res.faults["coordinator_kill"] >= 1, res.text
