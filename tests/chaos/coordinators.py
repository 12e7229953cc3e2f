"""Finding the coordinators a workload depends on, for the coordinator nemesis: the broker that
is the transaction coordinator of a transactional id (FindCoordinator key type 1, else the
leader of its `__transaction_state` partition), the group coordinator of a consumer group, and
a hunt for a coordinator caught between EndTxn and the end of its markers: ListTransactions
asked of every broker for transactions in PrepareCommit/PrepareAbort, over and over, until one
answers with one (the moment a coordinator failover is hardest to get right)."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass

from samsa.coordinator.internal_log import partition_for
from tests.cluster.cluster import GROUP_KEY, TRANSACTION_KEY, Cluster
from tests.protocol.wire import WireClient

PREPARED_STATES = ["PrepareCommit", "PrepareAbort"]
LIST_TRANSACTIONS, FIND_COORDINATOR = 66, 10
TXN_TOPIC, OFFSETS_TOPIC = "__transaction_state", "__consumer_offsets"


@dataclass
class Target:
    broker_id: int
    role: str  # "txn" | "group"
    key: str  # the transactional id or group
    state: str = ""  # the transaction's state when found by the hunt (PrepareCommit, ...)

    def describe(self) -> str:
        what = "transaction" if self.role == "txn" else "group"
        return f"coordinator of {what} {self.key}" + (f" in {self.state}" if self.state else "")


def coordinator_of(cluster: Cluster, role: str, key: str) -> int:
    """The coordinator's broker id as FindCoordinator (v4) answers it; if no broker answers,
    the leader of the key's internal-topic partition (Java's String.hashCode partitioning)."""
    key_type = TRANSACTION_KEY if role == "txn" else GROUP_KEY
    for b in cluster.brokers:
        if not b.is_running():
            continue
        with contextlib.suppress(Exception), WireClient(b.bootstrap, timeout=3) as w:
            resp = w.call(FIND_COORDINATOR, 4, {"key_type": key_type, "coordinator_keys": [key]})
            found = [c.node_id for c in resp.coordinators if c.error_code == 0]
            if found and found[0] >= 0:
                return found[0]
    topic = TXN_TOPIC if role == "txn" else OFFSETS_TOPIC
    leaders = cluster.leaders(topic)
    return leaders[partition_for(key, len(leaders))]


class PreparedHunt:
    """Persistent connections to every running broker, each asked ListTransactions for its
    prepared transactions (one pipelined round per poll)."""

    def __init__(self, cluster: Cluster, txn_ids: list[str]) -> None:
        self.txn_ids = set(txn_ids)
        self.clients: dict[int, WireClient] = {}
        for b in cluster.brokers:
            if b.is_running():
                with contextlib.suppress(OSError):
                    self.clients[b.broker_id] = WireClient(b.bootstrap, timeout=2)

    def close(self) -> None:
        for w in self.clients.values():
            w.close()

    def poll(self) -> Target | None:
        """One round: a broker coordinating one of our transactions in a prepared state."""
        sent = {}
        for bid, w in list(self.clients.items()):
            try:
                corr, data = w.encode_request(LIST_TRANSACTIONS, 0, {
                    "state_filters": PREPARED_STATES, "producer_id_filters": []})
                w.send_raw(data)
                sent[bid] = corr
            except OSError:
                self.clients.pop(bid).close()
        found = None
        for bid, corr in sent.items():
            try:
                resp = self.clients[bid].read_response(LIST_TRANSACTIONS, 0, corr)
            except (OSError, AssertionError):
                self.clients.pop(bid).close()
                continue
            for t in resp.transaction_states:
                if found is None and t.transactional_id in self.txn_ids:
                    found = Target(bid, "txn", t.transactional_id, t.transaction_state)
        return found

    def run(self, timeout: float, interval: float = 0.005) -> Target | None:
        """Poll until a prepared transaction shows up, or `timeout` seconds pass."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.clients:
            found = self.poll()
            if found is not None:
                return found
            time.sleep(interval)
        return None


def hunt_prepared(cluster: Cluster, txn_ids: list[str], timeout: float) -> Target | None:
    hunt = PreparedHunt(cluster, txn_ids)
    try:
        return hunt.run(timeout)
    finally:
        hunt.close()
