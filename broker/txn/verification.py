"""The partition leader's side of KIP-890 in a cluster (Kafka's AddPartitionsToTxnManager):
before the first transactional append of a producer to a partition, the leader asks the
transaction coordinator, when that is another broker, whether the partition is in the
producer's ongoing transaction: AddPartitionsToTxn v5 with VerifyOnly, one request per
coordinator for all the partitions of a Produce request; for Produce v12 (transactions v2)
without VerifyOnly, which adds them to the transaction. (A local coordinator is asked
in-process: broker/handlers/transactions.py.)

The coordinator is found as FindCoordinator finds it: the leader of the transactional id's
`__transaction_state` partition in the metadata store.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from samsa.coordinator.internal_log import partition_for
from samsa.protocol.errors import ErrorCode

from ..network.interbroker import BrokerConnection, BrokerUnavailable

if TYPE_CHECKING:
    from ..cluster.metadata_store import MetadataStore

log = logging.getLogger(__name__)

ADD_PARTITIONS_TO_TXN = 24
TXN_TOPIC = "__transaction_state"

# Kafka's request.timeout.ms default, which also bounds add.partitions.to.txn.retry.backoff.max.ms
# (Samsa has no broker-side request timeout property).
KAFKA_REQUEST_TIMEOUT_MS = 30_000

# Coordinator answers that only mean "not now" (Kafka's ReplicaManager turns them into
# NOT_ENOUGH_REPLICAS, which every client retries).
_RETRIABLE = frozenset({
    ErrorCode.concurrent_transactions,
    ErrorCode.network_exception,
    ErrorCode.coordinator_load_in_progress,
    ErrorCode.coordinator_not_available,
    ErrorCode.not_coordinator,
})


def produce_error(code: int, produce_version: int) -> int:
    """A coordinator's verification answer as the Produce response of `produce_version`
    carries it (Kafka's AddPartitionsToTxnManager and ReplicaManager). Transactions v2
    (Produce v12+) gets CONCURRENT_TRANSACTIONS as it is: a client of that version knows it."""
    if code == ErrorCode.producer_fenced:
        return ErrorCode.invalid_producer_epoch
    if code == ErrorCode.concurrent_transactions and produce_version >= 12:
        return code
    if code in _RETRIABLE or code == ErrorCode.not_enough_replicas:
        return ErrorCode.not_enough_replicas
    if code == ErrorCode.transaction_abortable and produce_version < 11:
        return ErrorCode.invalid_txn_state
    return code


class TxnPartitionVerifier:
    """Sends the verification requests, over one connection per coordinator broker."""

    def __init__(self, store: MetadataStore, broker_id: int, txn_partitions: int) -> None:
        self.store = store
        self.broker_id = broker_id
        self.txn_partitions = txn_partitions
        self._connections: dict[int, BrokerConnection] = {}

    def coordinator_of(self, transactional_id: str) -> int:
        """The broker id leading the id's __transaction_state partition, or -1."""
        topic = self.store.topic(TXN_TOPIC)
        if topic is None:
            return -1
        state = topic.partitions.get(partition_for(transactional_id, self.txn_partitions))
        return -1 if state is None else state.leader

    async def verify(
        self,
        coordinator: int,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: list[tuple[str, int]],
        verify_only: bool = True,
    ) -> dict[tuple[str, int], int]:
        """The coordinator's answer per partition (Kafka's codes, not yet mapped for Produce).
        Without `verify_only` the coordinator adds the partitions to the transaction (a TV2
        client's Produce v12 or TxnOffsetCommit v5: the client sends no AddPartitionsToTxn)."""
        if coordinator < 0:
            return dict.fromkeys(partitions, ErrorCode.coordinator_not_available)
        topics: dict[str, list[int]] = {}
        for t, p in partitions:
            topics.setdefault(t, []).append(p)
        body: dict[str, Any] = {"transactions": [{
            "transactional_id": transactional_id,
            "producer_id": producer_id,
            "producer_epoch": producer_epoch,
            "verify_only": verify_only,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
        }]}
        conn = self._connections.get(coordinator)
        if conn is None:
            conn = self._connections[coordinator] = BrokerConnection(
                self.store, coordinator, f"broker-{self.broker_id}-txn-verification", 10.0)
        try:
            r = await conn.request(ADD_PARTITIONS_TO_TXN, 5, body)
        except BrokerUnavailable as exc:
            log.info("verifying %s with coordinator %d failed: %s", transactional_id,
                     coordinator, exc)
            return dict.fromkeys(partitions, ErrorCode.network_exception)
        if r.error_code != ErrorCode.none:
            code = (ErrorCode.invalid_txn_state
                    if r.error_code == ErrorCode.cluster_authorization_failed else r.error_code)
            return dict.fromkeys(partitions, code)
        out: dict[tuple[str, int], int] = dict.fromkeys(partitions, ErrorCode.unknown_server_error)
        for result in r.results_by_transaction:
            for t in result.topic_results:
                for p in t.results_by_partition:
                    out[(t.name, p.partition_index)] = int(p.partition_error_code)
        return out

    def close(self) -> None:
        for conn in self._connections.values():
            conn.close()
        self._connections.clear()
