"""A transaction coordinator's verification answer as a Produce response carries it (Kafka's
AddPartitionsToTxnManager and ReplicaManager): NONE stays NONE, a fenced producer is an
invalid epoch, "not now" answers are NOT_ENOUGH_REPLICAS (which every client retries) except
CONCURRENT_TRANSACTIONS for a transactions v2 client (Produce v12+), and TRANSACTION_ABORTABLE
is INVALID_TXN_STATE for a client older than Produce v11, which does not know it."""

from __future__ import annotations

import pytest

from samsa.broker.txn.verification import produce_error
from samsa.protocol.errors import ErrorCode as E

# coordinator's answer -> the Produce response's code at v9, v11, v12
EXPECTED = {
    E.none: (E.none, E.none, E.none),
    E.producer_fenced: (E.invalid_producer_epoch,) * 3,
    E.concurrent_transactions: (E.not_enough_replicas, E.not_enough_replicas,
                                E.concurrent_transactions),
    E.network_exception: (E.not_enough_replicas,) * 3,
    E.coordinator_load_in_progress: (E.not_enough_replicas,) * 3,
    E.coordinator_not_available: (E.not_enough_replicas,) * 3,
    E.not_coordinator: (E.not_enough_replicas,) * 3,
    E.not_enough_replicas: (E.not_enough_replicas,) * 3,
    E.transaction_abortable: (E.invalid_txn_state, E.transaction_abortable,
                              E.transaction_abortable),
    E.invalid_producer_id_mapping: (E.invalid_producer_id_mapping,) * 3,
    E.invalid_producer_epoch: (E.invalid_producer_epoch,) * 3,
}


@pytest.mark.parametrize("code", list(EXPECTED))
def test_a_coordinator_answer_as_each_produce_version_carries_it(code: E) -> None:
    got = tuple(produce_error(code, version) for version in (9, 11, 12))
    assert got == EXPECTED[code]
