"""What the console's pages show, gathered with the admin client (broker/admin/client.py) over
the Kafka protocol only, so the console works against any Kafka-compatible broker.

Every function here blocks (the admin client is a blocking one): the web handlers run them in a
thread. The requests broker/admin/ has no function for are sent here: DescribeLogDirs,
DescribeProducers, ListTransactions, DescribeTransactions, WriteTxnMarkers (the abort of a
hanging transaction, as `kafka-transactions.sh abort`), DescribeAcls,
DescribeUserScramCredentials and Fetch.
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any

from samsa.broker.admin import cluster as admin_cluster
from samsa.broker.admin import groups as admin_groups
from samsa.broker.admin.client import Admin, AdminError, Connection, check
from samsa.protocol.errors import ErrorCode
from samsa.protocol.records import decode_records, iter_batches

FETCH, LIST_OFFSETS, METADATA, WRITE_TXN_MARKERS, DESCRIBE_ACLS = 1, 2, 3, 27, 29
DESCRIBE_LOG_DIRS, DESCRIBE_USER_SCRAM = 35, 50
DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 61, 65, 66
FETCH_BY_NAME = 12  # Fetch v13+ names topics by id only
EARLIEST, LATEST = -2, -1
TXN_KEY = 1  # FindCoordinator key type of a transactional id
ONGOING_STATES = ("Ongoing", "PrepareCommit", "PrepareAbort")

TP = tuple[str, int]


# ---- brokers -------------------------------------------------------------------------------


def brokers(admin: Admin) -> dict[str, Any]:
    """The cluster (DescribeCluster or Metadata), each broker's health (it answers ApiVersions
    and how fast), its log dirs' space and its share of leaders and lagging replicas."""
    info = admin_cluster.describe(admin)
    meta = admin.metadata()
    leaders: dict[int, int] = defaultdict(int)
    under: dict[int, int] = defaultdict(int)
    for t in meta.topics:
        for p in t.partitions:
            leaders[int(p.leader_id)] += 1
            for r in set(p.replica_nodes) - set(p.isr_nodes):
                under[int(r)] += 1
    for b in info["brokers"]:
        b["leaders"], b["lagging_replicas"] = leaders[b["id"]], under[b["id"]]
        b.update(_health(admin, b["id"]))
    return info


def _health(admin: Admin, node_id: int) -> dict[str, Any]:
    started = time.monotonic()
    try:
        conn = admin.node(node_id)
        dirs = _log_dirs(conn, None)
    except AdminError as e:
        return {"up": False, "error": str(e), "latency_ms": None, "log_dirs": []}
    latency = round((time.monotonic() - started) * 1000, 1)
    return {"up": True, "error": None, "latency_ms": latency, "log_dirs": [
        {"path": d.log_dir, "error": _err(d.error_code), "total_bytes": int(d.total_bytes),
         "usable_bytes": int(d.usable_bytes)} for d in dirs]}


def _err(code: int) -> str | None:
    return None if code == ErrorCode.none else ErrorCode(code).name.upper()


def _log_dirs(conn: Connection, topics: list[str] | None) -> Any:
    body = {"topics": None if topics is None else [{"topic": t, "partitions": []}
                                                   for t in topics]}
    resp = conn.call(DESCRIBE_LOG_DIRS, body)
    check(getattr(resp, "error_code", 0))
    return resp.results


# ---- topics --------------------------------------------------------------------------------


def _sizes(admin: Admin) -> dict[tuple[int, str, int], int]:
    """(broker, topic, partition) -> bytes on that broker (DescribeLogDirs of every broker;
    a broker that does not answer is left out)."""
    out: dict[tuple[int, str, int], int] = {}
    for node_id in admin.brokers():
        try:
            results = _log_dirs(admin.node(node_id), None)
        except AdminError:
            continue
        for d in results:
            for t in d.topics:
                for p in t.partitions:
                    if not p.is_future_key:
                        out[(node_id, t.name, int(p.partition_index))] = int(p.partition_size)
    return out


def topics(admin: Admin) -> list[dict[str, Any]]:
    meta = admin.metadata()
    sizes = _sizes(admin)
    rows = []
    for t in meta.topics:
        if t.error_code != ErrorCode.none:
            continue
        parts = list(t.partitions)
        rows.append({
            "name": t.name, "internal": bool(t.is_internal), "partitions": len(parts),
            "replication_factor": len(parts[0].replica_nodes) if parts else 0,
            "under_replicated": sum(len(p.isr_nodes) < len(p.replica_nodes) for p in parts),
            "offline": sum(p.leader_id < 0 for p in parts),
            "size": sum(sizes.get((int(p.leader_id), t.name, int(p.partition_index)), 0)
                        for p in parts)})
    return sorted(rows, key=lambda r: r["name"])


def topic(admin: Admin, name: str) -> dict[str, Any]:
    (t,) = admin.metadata([name]).topics
    check(t.error_code)
    sizes = _sizes(admin)
    tps = {(name, int(p.partition_index)) for p in t.partitions}
    starts = admin_groups.offsets_at(admin, tps, EARLIEST)
    ends = admin_groups.offsets_at(admin, tps, LATEST)
    parts = []
    for p in sorted(t.partitions, key=lambda p: p.partition_index):
        i = int(p.partition_index)
        parts.append({
            "partition": i, "leader": int(p.leader_id), "replicas": list(p.replica_nodes),
            "isr": list(p.isr_nodes), "start_offset": starts.get((name, i)),
            "end_offset": ends.get((name, i)),
            "sizes": {r: sizes.get((int(r), name, i)) for r in p.replica_nodes}})
    return {"name": name, "internal": bool(t.is_internal), "partitions": parts}


# ---- groups --------------------------------------------------------------------------------


def groups(admin: Admin) -> list[dict[str, Any]]:
    """Every group with its members and offsets (each described by its coordinator)."""
    out = []
    for g in admin_groups.list_groups(admin, [], []):
        try:
            described = admin_groups.describe(admin, g["group_id"])
        except AdminError as e:
            described = {"error": str(e), "members": [], "offsets": []}
        out.append({**g, **described, "type": described.get("type") or g["type"]})
    return out


# ---- messages ------------------------------------------------------------------------------


def messages(admin: Admin, topic: str, partition: int, offset: int | None,
             limit: int) -> dict[str, Any]:
    """Up to `limit` records of one partition from `offset` (default: the last `limit`)."""
    tp = (topic, partition)
    start = admin_groups.offsets_at(admin, {tp}, EARLIEST).get(tp, 0)
    end = admin_groups.offsets_at(admin, {tp}, LATEST).get(tp, 0)
    first = max(start, end - limit) if offset is None else max(offset, start)
    records: list[dict[str, Any]] = []
    position = first
    while len(records) < limit and position < end:
        batch = _fetch(admin, topic, partition, position)
        if not batch:
            break
        for r in batch:
            if r["offset"] >= position and len(records) < limit:
                records.append(r)
        position = batch[-1]["offset"] + 1
    return {"topic": topic, "partition": partition, "start_offset": start, "end_offset": end,
            "from_offset": first, "records": records}


def _fetch(admin: Admin, topic: str, partition: int, offset: int) -> list[dict[str, Any]]:
    (t,) = admin.metadata([topic]).topics
    check(t.error_code)
    leader = next(int(p.leader_id) for p in t.partitions if p.partition_index == partition)
    conn = admin.node(leader)
    body = {"replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [
                {"partition": partition, "fetch_offset": offset, "partition_max_bytes": 1 << 20,
                 "current_leader_epoch": -1, "log_start_offset": -1}]}],
            "forgotten_topics_data": [], "rack_id": ""}
    resp = conn.call(FETCH, body, min(conn.version(FETCH), FETCH_BY_NAME))
    (p,) = resp.responses[0].partitions
    check(p.error_code)
    data = bytes(p.records or b"")
    out = []
    for pos, h in iter_batches(data):
        if h.is_control:
            continue
        for r in decode_records(data, pos, h):
            out.append({"offset": r.offset, "timestamp": r.timestamp, "key": r.key,
                        "value": r.value, "headers": r.headers,
                        "transactional": h.is_transactional})
    return out


# ---- transactions --------------------------------------------------------------------------


def transactions(admin: Admin) -> list[dict[str, Any]]:
    """Every transactional id the coordinators know (ListTransactions on each broker), each
    described by its coordinator (DescribeTransactions)."""
    listed: dict[str, dict[str, Any]] = {}
    for node_id in sorted(admin.brokers()):
        conn = admin.node(node_id)
        if not conn.supports(LIST_TRANSACTIONS):
            continue
        resp = conn.call(LIST_TRANSACTIONS, {"state_filters": [], "producer_id_filters": [],
                                             "duration_filter": -1})
        check(resp.error_code)
        for s in resp.transaction_states:
            listed[s.transactional_id] = {"transactional_id": s.transactional_id,
                                          "producer_id": int(s.producer_id),
                                          "state": s.transaction_state, "coordinator": node_id}
    for txn_id, row in listed.items():
        row.update(_describe_transaction(admin, txn_id))
    return [listed[k] for k in sorted(listed)]


def _describe_transaction(admin: Admin, txn_id: str) -> dict[str, Any]:
    try:
        conn = _txn_coordinator(admin, txn_id)
        (d,) = conn.call(DESCRIBE_TRANSACTIONS, {"transactional_ids": [txn_id]}
                         ).transaction_states
        check(d.error_code)
    except AdminError as e:
        return {"error": str(e)}
    start = d.transaction_start_time
    return {"error": None, "state": d.transaction_state, "producer_id": int(d.producer_id),
            "producer_epoch": int(d.producer_epoch),
            "timeout_ms": int(d.transaction_timeout.total_seconds() * 1000),
            "start_ms": None if start is None or start.timestamp() <= 0
            else int(start.timestamp() * 1000),
            "partitions": sorted((t.topic, int(p)) for t in d.topics for p in t.partitions)}


def _txn_coordinator(admin: Admin, txn_id: str) -> Connection:
    conn = admin.any()
    v = conn.version(10)
    resp = conn.call(10, {"key_type": TXN_KEY, "key": txn_id, "coordinator_keys": [txn_id]}, v)
    found = resp.coordinators[0] if v >= 4 else resp
    check(found.error_code, found.error_message)
    return admin.connect(f"{found.host}:{found.port}")


def open_transactions(admin: Admin, max_timeout_ms: int) -> list[dict[str, Any]]:
    """The open transactions of every partition (DescribeProducers on each leader) and which of
    them hang, as `kafka-transactions.sh find-hanging` judges: open longer than
    `max_timeout_ms`, and not an ongoing transaction its coordinator knows on that partition."""
    known = {row["producer_id"]: row for row in transactions(admin)}
    now = int(time.time() * 1000)
    out = []
    for (topic, partition), state in _producer_states(admin):
        if state.current_txn_start_offset < 0:
            continue
        row: dict[str, Any] = {
            "topic": topic, "partition": partition, "producer_id": int(state.producer_id),
            "producer_epoch": int(state.producer_epoch),
            "coordinator_epoch": int(state.coordinator_epoch),
            "start_offset": int(state.current_txn_start_offset),
            "last_timestamp": int(state.last_timestamp),
            "duration_ms": max(now - int(state.last_timestamp), 0)}
        txn = known.get(row["producer_id"])
        row["transactional_id"] = txn["transactional_id"] if txn else None
        row["hanging"] = row["duration_ms"] > max_timeout_ms and not _coordinator_has(
            txn, topic, partition)
        out.append(row)
    return out


def _coordinator_has(txn: dict[str, Any] | None, topic: str, partition: int) -> bool:
    return bool(txn and not txn.get("error") and txn["state"] in ONGOING_STATES
                and (topic, partition) in txn.get("partitions", []))


def _producer_states(admin: Admin) -> list[tuple[TP, Any]]:
    by_leader: dict[int, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for t in admin.metadata().topics:
        for p in t.partitions:
            if p.leader_id >= 0 and t.error_code == ErrorCode.none:
                by_leader[int(p.leader_id)][t.name].append(int(p.partition_index))
    out = []
    for leader, topics_ in sorted(by_leader.items()):
        conn = admin.node(leader)
        if not conn.supports(DESCRIBE_PRODUCERS):
            continue
        resp = conn.call(DESCRIBE_PRODUCERS, {"topics": [
            {"name": t, "partition_indexes": ps} for t, ps in topics_.items()]})
        for t in resp.topics:
            for p in t.partitions:
                if p.error_code == ErrorCode.none:
                    out += [((t.name, int(p.partition_index)), s) for s in p.active_producers]
    return out


def abort(admin: Admin, topic: str, partition: int, producer_id: int, producer_epoch: int,
          coordinator_epoch: int) -> None:
    """Write an abort marker for the producer's open transaction on the partition
    (WriteTxnMarkers to its leader), as Kafka's Admin.abortTransaction does."""
    (t,) = admin.metadata([topic]).topics
    check(t.error_code)
    leader = next(int(p.leader_id) for p in t.partitions if p.partition_index == partition)
    resp = admin.node(leader).call(WRITE_TXN_MARKERS, {"markers": [{
        "producer_id": producer_id, "producer_epoch": producer_epoch,
        "transaction_result": False, "coordinator_epoch": coordinator_epoch,
        "topics": [{"name": topic, "partition_indexes": [partition]}]}]})
    for m in resp.markers:
        for rt in m.topics:
            for rp in rt.partitions:
                check(rp.error_code)


# ---- ACLs and users ------------------------------------------------------------------------

RESOURCE_TYPES = {1: "ANY", 2: "TOPIC", 3: "GROUP", 4: "CLUSTER", 5: "TRANSACTIONAL_ID",
                  6: "DELEGATION_TOKEN", 7: "USER"}
PATTERN_TYPES = {1: "ANY", 2: "MATCH", 3: "LITERAL", 4: "PREFIXED"}
OPERATIONS = {1: "ANY", 2: "ALL", 3: "READ", 4: "WRITE", 5: "CREATE", 6: "DELETE", 7: "ALTER",
              8: "DESCRIBE", 9: "CLUSTER_ACTION", 10: "DESCRIBE_CONFIGS", 11: "ALTER_CONFIGS",
              12: "IDEMPOTENT_WRITE", 13: "CREATE_TOKENS", 14: "DESCRIBE_TOKENS",
              15: "TWO_PHASE_COMMIT"}
PERMISSIONS = {1: "ANY", 2: "DENY", 3: "ALLOW"}
SCRAM_MECHANISMS = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}


def acls(admin: Admin) -> dict[str, Any]:
    """Every ACL (DescribeAcls with an all-matching filter); a cluster without an authorizer
    says SECURITY_DISABLED, shown as such."""
    resp = admin.any().call(DESCRIBE_ACLS, {
        "resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
        "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1})
    if resp.error_code == ErrorCode.security_disabled:
        return {"enabled": False, "acls": []}
    check(resp.error_code, resp.error_message)
    rows = [{"resource_type": RESOURCE_TYPES.get(r.resource_type, str(r.resource_type)),
             "resource_name": r.resource_name,
             "pattern_type": PATTERN_TYPES.get(r.pattern_type, str(r.pattern_type)),
             "principal": a.principal, "host": a.host,
             "operation": OPERATIONS.get(a.operation, str(a.operation)),
             "permission": PERMISSIONS.get(a.permission_type, str(a.permission_type))}
            for r in resp.resources for a in r.acls]
    return {"enabled": True, "acls": rows}


def users(admin: Admin) -> list[dict[str, Any]]:
    """The SCRAM users and their credentials' mechanisms and iterations."""
    conn = admin.any()
    if not conn.supports(DESCRIBE_USER_SCRAM):
        return []
    resp = conn.call(DESCRIBE_USER_SCRAM, {"users": None})
    check(resp.error_code, resp.error_message)
    return [{"user": r.user, "credentials": [
        f"{SCRAM_MECHANISMS.get(c.mechanism, c.mechanism)} ({c.iterations} iterations)"
        for c in r.credential_infos]} for r in sorted(resp.results, key=lambda r: r.user)
        if r.error_code == ErrorCode.none]
