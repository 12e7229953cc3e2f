"""What the console's pages show, gathered with the admin client (broker/admin/client.py) over
the Kafka protocol only, so the console works against any Kafka-compatible broker.

Every function here blocks (the admin client is a blocking one): the web handlers run them in a
thread. Groups, transactions, ACLs, users and the Fetch of a partition's records (with their
keys and values as bytes, so the page can show them as hex) are the admin commands' own
functions, so the console and `samsa group|txn|acl|user|consume` agree; the one request
broker/admin/ has no command for is sent here: DescribeLogDirs (sizes and free space).
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any

from samsa.broker.admin import acls as admin_acls
from samsa.broker.admin import cluster as admin_cluster
from samsa.broker.admin import groups as admin_groups
from samsa.broker.admin import messages as admin_messages
from samsa.broker.admin import txn as admin_txn
from samsa.broker.admin import users as admin_users
from samsa.broker.admin.client import (
    API_VERSIONS,
    Admin,
    AdminError,
    Connection,
    KafkaRequestError,
    check,
)
from samsa.protocol.errors import ErrorCode

DESCRIBE_LOG_DIRS, DESCRIBE_USER_SCRAM = 35, 50
EARLIEST, LATEST = -2, -1

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
    """Up when the broker answers ApiVersions (the time of one round trip is shown); its log
    dirs when it lets us describe them (DescribeLogDirs needs Describe on the cluster)."""
    try:
        conn = admin.node(node_id)
        started = time.monotonic()
        conn.call(API_VERSIONS, {}, version=2)  # v2: every broker since Kafka 2.0 answers it
    except AdminError as e:
        return {"up": False, "error": str(e), "latency_ms": None, "log_dirs": []}
    latency = round((time.monotonic() - started) * 1000, 1)
    try:
        dirs = [{"path": d.log_dir, "error": _err(d.error_code),
                 "total_bytes": int(d.total_bytes), "usable_bytes": int(d.usable_bytes)}
                for d in _log_dirs(conn, None)]
    except KafkaRequestError as e:
        dirs = [{"path": None, "error": e.name, "total_bytes": None, "usable_bytes": None}]
    return {"up": True, "error": None, "latency_ms": latency, "log_dirs": dirs}


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


CREATED_WAIT_S = 10.0  # how long a topic just created may take to show in Metadata


def await_created(admin: Admin, name: str, partitions: int) -> None:
    """Wait (at most CREATED_WAIT_S) until Metadata shows a topic just created with every
    partition led: Kafka answers CreateTopics before its brokers' metadata has the topic, and
    the topic's page, shown next, would otherwise say it does not exist."""
    deadline = time.monotonic() + CREATED_WAIT_S
    while time.monotonic() < deadline:
        (t,) = admin.metadata([name]).topics
        if (t.error_code == ErrorCode.none and len(t.partitions) >= partitions
                and all(p.leader_id >= 0 for p in t.partitions)):
            return
        time.sleep(0.1)


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
             limit: int, committed: bool = False) -> dict[str, Any]:
    """Up to `limit` records of one partition from `offset` (default: the last `limit`);
    `committed`: only those a read_committed consumer gets (which the admin consumer finds,
    leaving out aborted transactions and stopping at the last stable offset)."""
    (t,) = admin.metadata([topic]).topics
    check(t.error_code)
    leaders = {int(p.partition_index): int(p.leader_id) for p in t.partitions}
    if partition not in leaders:
        raise KafkaRequestError(ErrorCode.unknown_topic_or_partition,
                                f"{topic} has no partition {partition}")
    tp = (topic, partition)
    start = admin_groups.offsets_at(admin, {tp}, EARLIEST).get(tp, 0)
    end = admin_groups.offsets_at(admin, {tp}, LATEST).get(tp, 0)
    first = max(start, end - limit) if offset is None else max(offset, start)
    shown: set[int] | None = None
    stop = end
    if committed:
        shown = {r["offset"] for r in admin_messages.consume(
            admin, topic, partition, offset=first, isolation="read_committed", limit=limit)}
        stop = max(shown, default=first - 1) + 1
    records: list[dict[str, Any]] = []
    position = first
    while len(records) < limit and position < stop:
        fetched, following = _fetch(admin.node(leaders[partition]), tp, position)
        records += [r for r in fetched if r["offset"] >= position and (
            shown is None or r["offset"] in shown)][:limit - len(records)]
        if following <= position:
            break
        position = following
    return {"topic": topic, "partition": partition, "start_offset": start, "end_offset": end,
            "from_offset": first, "committed": committed, "records": records}


def _fetch(conn: Connection, tp: TP, offset: int) -> tuple[list[dict[str, Any]], int]:
    """The data records of one Fetch from `offset` (the admin consumer's Fetch, its records
    with their bytes), and the offset after its last batch."""
    fetched, _ = admin_messages.fetch(conn, tp, offset, admin_messages.READ_UNCOMMITTED)
    return admin_messages.raw_records(fetched), fetched["next"]


# ---- transactions --------------------------------------------------------------------------


def transactions(admin: Admin) -> list[dict[str, Any]]:
    """Every transactional id the coordinators know, each described by its coordinator (an
    id that went away meanwhile shows its error)."""
    out = []
    for row in admin_txn.list_transactions(admin, [], []):
        try:
            out.append({**row, **admin_txn.describe(admin, row["transactional_id"]),
                        "error": None})
        except AdminError as e:
            out.append({**row, "error": str(e)})
    return out


def open_transactions(admin: Admin, txns: list[dict[str, Any]], max_minutes: int
                      ) -> list[dict[str, Any]]:
    """The open transactions of every partition (DescribeProducers at each leader), each
    marked hanging when `kafka-transactions.sh find-hanging` would list it (the admin
    command's own search, on the topics that have one open)."""
    partitions = {(t.name, int(p.partition_index)) for t in admin.metadata().topics
                  if t.error_code == ErrorCode.none for p in t.partitions if p.leader_id >= 0}
    found = admin_txn.producers(admin, partitions) if partitions else {}
    now = int(time.time() * 1000)
    ids = {t["producer_id"]: t["transactional_id"] for t in txns}
    rows = [{"topic": topic, "partition": partition, **p,
             "duration_ms": max(now - p["last_timestamp"], 0),
             "transactional_id": ids.get(p["producer_id"])}
            for (topic, partition), ps in sorted(found.items()) for p in ps
            if p["current_txn_start_offset"] is not None]
    hanging = {(h["topic"], h["partition"], h["producer_id"])
               for topic in sorted({r["topic"] for r in rows})
               for h in admin_txn.find_hanging(admin, None, topic, None, max_minutes)}
    for r in rows:
        r["hanging"] = (r["topic"], r["partition"], r["producer_id"]) in hanging
    return rows


def abort(admin: Admin, topic: str, partition: int, start_offset: int) -> None:
    """An abort marker for the transaction open at `start_offset`, as
    `kafka-transactions.sh abort --start-offset` writes it."""
    admin_txn.abort(admin, topic, partition, start_offset)


# ---- ACLs and users ------------------------------------------------------------------------


def acls(admin: Admin) -> dict[str, Any]:
    """Every ACL; a cluster without an authorizer answers SECURITY_DISABLED, shown as such."""
    try:
        return {"enabled": True, "acls": admin_acls.list_acls(admin, admin_acls.Filter())}
    except KafkaRequestError as e:
        if e.code == ErrorCode.security_disabled:
            return {"enabled": False, "acls": []}
        raise


def users(admin: Admin) -> list[dict[str, Any]]:
    """The SCRAM users with their mechanisms and iterations (none where the broker predates
    DescribeUserScramCredentials)."""
    if not admin.any().supports(DESCRIBE_USER_SCRAM):
        return []
    return admin_users.describe(admin, None)
