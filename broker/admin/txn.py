"""`samsa txn list|describe|describe-producers|abort|find-hanging`, as kafka-transactions.sh
does them: ListTransactions at every broker, DescribeTransactions at the transactional id's
coordinator, DescribeProducers at a partition's leader, and an abort as WriteTxnMarkers (an
abort marker for the producer) sent to the leader, which needs ClusterAction on the cluster.

find-hanging is the tool's search: the producers with an open transaction on the partitions
searched whose last record is older than --max-transaction-timeout; then one is hanging when no
transactional id has its producer id (ListTransactions filtered by producer id), its
coordinator does not know the transactional id, or the coordinator's transaction does not
include the partition (so no marker will ever be written there).
"""

from __future__ import annotations

import datetime
import time
from collections import defaultdict
from typing import Any

from samsa.protocol.errors import ErrorCode

from . import topics
from .client import TXN_KEY, Admin, AdminError, KafkaRequestError, check, retrying

WRITE_TXN_MARKERS, DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 27, 61, 65, 66

TP = tuple[str, int]


def _ms(value: Any) -> int | None:
    """A kio timestamp or duration (datetime / timedelta / int) as milliseconds; None when
    unset (-1)."""
    if isinstance(value, datetime.datetime):
        ms = int(value.timestamp() * 1000)
    elif isinstance(value, datetime.timedelta):
        ms = int(value.total_seconds() * 1000)
    else:
        ms = int(value)
    return None if ms < 0 else ms


# ---- list / describe -----------------------------------------------------------------------


def list_transactions(admin: Admin, states: list[str], producer_ids: list[int],
                      duration_ms: int | None = None, pattern: str | None = None
                      ) -> list[dict[str, Any]]:
    """Every coordinator's transactional ids, filtered by the broker (states, producer ids;
    ListTransactions v1 the duration of the open transaction, v2 a regular expression of the
    id)."""
    body = {"state_filters": states, "producer_id_filters": producer_ids,
            "duration_filter": -1 if duration_ms is None else duration_ms,
            "transactional_id_pattern": pattern}
    rows = []
    for node_id in sorted(admin.brokers()):
        conn = admin.node(node_id)
        if duration_ms is not None and conn.version(LIST_TRANSACTIONS) < 1 or (
                pattern is not None and conn.version(LIST_TRANSACTIONS) < 2):
            raise AdminError("UNSUPPORTED_VERSION", f"broker {node_id} does not filter "
                             "transactions by duration (ListTransactions v1) or id pattern (v2)")
        resp = conn.call(LIST_TRANSACTIONS, body)
        check(resp.error_code)
        rows += [{"transactional_id": t.transactional_id, "coordinator": node_id,
                  "producer_id": int(t.producer_id), "state": t.transaction_state}
                 for t in resp.transaction_states]
    return sorted(rows, key=lambda r: r["transactional_id"])


def _node_id(admin: Admin, address: str) -> int | None:
    return next((n for n, a in admin.brokers().items() if a == address), None)


def describe(admin: Admin, txn_id: str) -> dict[str, Any]:
    def attempt() -> dict[str, Any]:
        conn = admin.coordinator(txn_id, TXN_KEY)
        (t,) = conn.call(DESCRIBE_TRANSACTIONS,
                         {"transactional_ids": [txn_id]}).transaction_states
        check(t.error_code, f"Transactional id {txn_id} not found." if (
            t.error_code == ErrorCode.transactional_id_not_found) else None)
        start = _ms(t.transaction_start_time)
        return {"coordinator_id": _node_id(admin, conn.address), "transactional_id": txn_id,
                "producer_id": int(t.producer_id), "producer_epoch": int(t.producer_epoch),
                "state": t.transaction_state, "timeout_ms": _ms(t.transaction_timeout),
                "start_time_ms": start,
                "duration_ms": None if start is None else max(_now_ms() - start, 0),
                "topic_partitions": [{"topic": tp.topic, "partition": int(p)}
                                     for tp in t.topics for p in sorted(tp.partitions)]}

    return retrying(admin.settings, attempt)


def _now_ms() -> int:
    return int(time.time() * 1000)


# ---- producers -----------------------------------------------------------------------------


def _leaders(admin: Admin, partitions: set[TP]) -> dict[TP, int]:
    out = {}
    for t in admin.metadata(sorted({t for t, _ in partitions})).topics:
        topics.check_found(t)
        for p in t.partitions:
            if (t.name, int(p.partition_index)) in partitions:
                out[(t.name, int(p.partition_index))] = int(p.leader_id)
    missing = sorted(partitions - set(out))
    if missing:
        raise KafkaRequestError(ErrorCode.unknown_topic_or_partition,
                                "{} has no partition {}".format(*missing[0]))
    return out


def producers(admin: Admin, partitions: set[TP], broker_id: int | None = None
              ) -> dict[TP, list[dict[str, Any]]]:
    """Each partition's active producers, from its leader (or from replica `broker_id`)."""
    by_node: dict[int, list[TP]] = defaultdict(list)
    for tp, leader in _leaders(admin, partitions).items():
        by_node[leader if broker_id is None else broker_id].append(tp)
    out: dict[TP, list[dict[str, Any]]] = {}
    for node, tps in by_node.items():
        topics: dict[str, list[int]] = defaultdict(list)
        for topic, partition in sorted(tps):
            topics[topic].append(partition)
        body = {"topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]}
        for t in admin.node(node).call(DESCRIBE_PRODUCERS, body).topics:
            for p in t.partitions:
                check(p.error_code, p.error_message)
                out[(t.name, int(p.partition_index))] = [_producer(s) for s in
                                                          p.active_producers]
    return out


def _producer(s: Any) -> dict[str, Any]:
    return {"producer_id": int(s.producer_id), "producer_epoch": int(s.producer_epoch),
            "coordinator_epoch": int(s.coordinator_epoch),
            "last_sequence": int(s.last_sequence), "last_timestamp": int(s.last_timestamp),
            "current_txn_start_offset": None if s.current_txn_start_offset < 0
            else int(s.current_txn_start_offset)}


def describe_producers(admin: Admin, topic: str, partition: int,
                       broker_id: int | None) -> list[dict[str, Any]]:
    return producers(admin, {(topic, partition)}, broker_id)[(topic, partition)]


# ---- abort ---------------------------------------------------------------------------------


def abort(admin: Admin, topic: str, partition: int, start_offset: int | None,
          producer_id: int | None = None, producer_epoch: int | None = None,
          coordinator_epoch: int | None = None) -> dict[str, Any]:
    """Write an abort marker for the transaction starting at `start_offset` (found with
    DescribeProducers), or for the producer given by id and epochs (brokers before 3.0)."""
    if start_offset is not None:
        found = [p for p in describe_producers(admin, topic, partition, None)
                 if p["current_txn_start_offset"] == start_offset]
        if not found:
            raise AdminError("INVALID_TXN_STATE", "Could not find any open transactions "
                             f"starting at offset {start_offset} on partition "
                             f"{topic}-{partition}")
        producer_id, producer_epoch = found[0]["producer_id"], found[0]["producer_epoch"]
        coordinator_epoch = found[0]["coordinator_epoch"]
    if producer_id is None or producer_epoch is None or coordinator_epoch is None:
        raise AdminError("INVALID_CONFIG", "give --start-offset, or --producer-id, "
                         "--producer-epoch and --coordinator-epoch")
    # A producer that never finished a transaction shows coordinator epoch -1; 0 is at most
    # any epoch a marker is checked against (as the tool does).
    coordinator_epoch = max(coordinator_epoch, 0)
    body = {"markers": [{"producer_id": producer_id, "producer_epoch": producer_epoch,
                         "transaction_result": False, "coordinator_epoch": coordinator_epoch,
                         "topics": [{"name": topic, "partition_indexes": [partition]}]}]}
    leader = _leaders(admin, {(topic, partition)})[(topic, partition)]
    resp = admin.node(leader).call(WRITE_TXN_MARKERS, body)
    for m in resp.markers:
        for t in m.topics:
            for p in t.partitions:
                check(p.error_code)
    return {"topic": topic, "partition": partition, "producer_id": producer_id,
            "producer_epoch": producer_epoch, "coordinator_epoch": coordinator_epoch,
            "aborted": True}


# ---- find-hanging --------------------------------------------------------------------------


def _search_scope(admin: Admin, broker_id: int | None, topic: str | None,
                  partition: int | None) -> set[TP]:
    if topic is not None and partition is not None:
        return {(topic, partition)}
    out = set()
    for t in admin.metadata([topic] if topic is not None else None).topics:
        topics.check_found(t)
        out |= {(t.name, int(p.partition_index)) for p in t.partitions
                if broker_id is None or broker_id in p.replica_nodes}
    return out


def find_hanging(admin: Admin, broker_id: int | None, topic: str | None,
                 partition: int | None, max_timeout_minutes: int) -> list[dict[str, Any]]:
    if topic is None and broker_id is None:
        raise AdminError("INVALID_CONFIG", "find-hanging needs --topic or --broker-id to limit "
                         "the search")
    if partition is not None and topic is None:
        raise AdminError("INVALID_CONFIG", "--partition needs --topic")
    now = _now_ms()
    candidates = [(tp, p) for tp, ps in producers(
        admin, _search_scope(admin, broker_id, topic, partition), broker_id).items()
        for p in ps if p["current_txn_start_offset"] is not None
        and now - p["last_timestamp"] > max_timeout_minutes * 60_000]
    hanging = []
    if candidates:
        pids = sorted({p["producer_id"] for _, p in candidates})
        ids = {r["producer_id"]: r["transactional_id"]
               for r in list_transactions(admin, [], pids)}
        txns = {pid: _describe_or_none(admin, txn_id) for pid, txn_id in ids.items()}
        for tp, p in candidates:
            txn = txns.get(p["producer_id"])
            if txn is None or {"topic": tp[0], "partition": tp[1]} not in txn[
                    "topic_partitions"]:
                hanging.append((tp, p))
    return [{"topic": t, "partition": n, "producer_id": p["producer_id"],
             "producer_epoch": p["producer_epoch"], "coordinator_epoch": p["coordinator_epoch"],
             "start_offset": p["current_txn_start_offset"],
             "last_timestamp": p["last_timestamp"],
             "duration_minutes": (now - p["last_timestamp"]) // 60_000}
            for (t, n), p in sorted(hanging, key=lambda h: (h[0], h[1]["producer_id"]))]


def _describe_or_none(admin: Admin, txn_id: str) -> dict[str, Any] | None:
    try:
        return describe(admin, txn_id)
    except KafkaRequestError as e:
        if e.code == ErrorCode.transactional_id_not_found:
            return None
        raise
