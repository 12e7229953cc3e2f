"""`samsa reassign execute|list|cancel` and `samsa elect-leaders`: AlterPartitionReassignments,
ListPartitionReassignments (KIP-455) and ElectLeaders (KIP-460), sent to the controller as
Kafka's Admin client sends them.

A reassignment is given as kafka-reassign-partitions.sh's JSON file ({"version": 1,
"partitions": [{"topic", "partition", "replicas"}]}) or as `--move TOPIC:PARTITION=B1,B2,...`;
with --wait the command follows it (ListPartitionReassignments) until no partition of it is
moving any more, reporting progress on stderr, as it can take long (the data is copied).
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from samsa.protocol.errors import ErrorCode

from .client import Admin, AdminError, KafkaRequestError, check, error_name

ELECT_LEADERS, ALTER_REASSIGNMENTS, LIST_REASSIGNMENTS = 43, 45, 46
TIMEOUT_MS = 30_000
ELECTION_TYPES = {"preferred": 0, "unclean": 1}
TP = tuple[str, int]
Progress = Callable[[str], None]


def parse_partition(spec: str) -> TP:
    topic, sep, partition = spec.rpartition(":")
    if not sep or not topic or not partition.isdigit():
        raise AdminError("INVALID_REQUEST", f"{spec!r}: want TOPIC:PARTITION")
    return topic, int(partition)


def parse_move(spec: str) -> tuple[TP, list[int]]:
    """`TOPIC:PARTITION=B1,B2,...`."""
    where, sep, replicas = spec.partition("=")
    try:
        brokers = [int(b) for b in replicas.split(",")]
    except ValueError:
        brokers = []
    if not sep or not brokers:
        raise AdminError("INVALID_REQUEST", f"--move {spec!r}: want TOPIC:PARTITION=B1,B2,...")
    return parse_partition(where), brokers


def load_plan(path: str) -> dict[TP, list[int]]:
    """kafka-reassign-partitions.sh's reassignment JSON."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        return {(p["topic"], int(p["partition"])): [int(r) for r in p["replicas"]]
                for p in doc["partitions"]}
    except (KeyError, TypeError, ValueError) as e:
        raise AdminError("INVALID_REQUEST", f"{path}: not a reassignment JSON "
                         "({\"partitions\": [{\"topic\", \"partition\", \"replicas\"}]})") from e


def _by_topic(partitions: dict[TP, Any]) -> dict[str, list[tuple[int, Any]]]:
    out: dict[str, list[tuple[int, Any]]] = defaultdict(list)
    for (topic, partition), value in sorted(partitions.items()):
        out[topic].append((partition, value))
    return out


def alter(admin: Admin, plan: dict[TP, list[int] | None]) -> list[dict[str, Any]]:
    """Start (replicas) or cancel (None) the reassignment of each partition."""
    body = {"timeout": TIMEOUT_MS, "topics": [
        {"name": t, "partitions": [{"partition_index": p, "replicas": r} for p, r in ps]}
        for t, ps in _by_topic(plan).items()]}
    resp = admin.controller().call(ALTER_REASSIGNMENTS, body)
    check(resp.error_code, resp.error_message)
    failed = [(t.name, p.partition_index, p.error_code, p.error_message)
              for t in resp.responses for p in t.partitions if p.error_code != ErrorCode.none]
    if failed:
        t, p, code, message = failed[0]
        raise KafkaRequestError(code, f"{t}-{p}: {message or error_name(code)}"
                                + (f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""))
    return [{"topic": t, "partition": p, "replicas": r} for (t, p), r in sorted(plan.items())]


def ongoing(admin: Admin, partitions: set[TP] | None = None) -> list[dict[str, Any]]:
    """The reassignments in progress (of `partitions`, or all)."""
    topics = None if partitions is None else [
        {"name": t, "partition_indexes": [p for p, _ in ps]}
        for t, ps in _by_topic(dict.fromkeys(partitions)).items()]
    resp = admin.controller().call(LIST_REASSIGNMENTS, {"timeout": TIMEOUT_MS,
                                                        "topics": topics})
    check(resp.error_code, resp.error_message)
    rows = [{"topic": t.name, "partition": int(p.partition_index),
             "replicas": [int(r) for r in p.replicas],
             "adding": [int(r) for r in p.adding_replicas],
             "removing": [int(r) for r in p.removing_replicas]}
            for t in resp.topics for p in t.partitions]
    return sorted(rows, key=lambda r: (r["topic"], r["partition"]))


def execute(admin: Admin, plan: dict[TP, list[int] | None], wait: bool, timeout_s: float,
            progress: Progress) -> dict[str, Any]:
    started = time.monotonic()
    rows = alter(admin, dict(plan))
    if wait:
        _follow(admin, set(plan), started + timeout_s, progress)
    return {"partitions": rows, "done": wait,
            "seconds": round(time.monotonic() - started, 1) if wait else None}


def _follow(admin: Admin, partitions: set[TP], deadline: float, progress: Progress) -> None:
    last = ""
    while True:
        moving = ongoing(admin, partitions)
        if not moving:
            progress(f"all {len(partitions)} partition(s) reassigned")
            return
        line = "; ".join(f"{r['topic']}-{r['partition']}: adding {r['adding'] or '-'}, "
                         f"removing {r['removing'] or '-'}" for r in moving)
        if line != last:
            progress(f"{len(partitions) - len(moving)}/{len(partitions)} done; {line}")
            last = line
        if time.monotonic() > deadline:
            raise AdminError("REQUEST_TIMED_OUT", f"{len(moving)} partition(s) still moving "
                             "(the reassignment goes on; see samsa reassign list)")
        time.sleep(0.5)


# ---- elect-leaders ---------------------------------------------------------------------------


def elect_leaders(admin: Admin, election: str, partitions: set[TP] | None
                  ) -> list[dict[str, Any]]:
    """Elect leaders of `partitions` (all with None). A partition whose preferred (or any
    in-sync) leader leads already reports ELECTION_NOT_NEEDED, which is no failure."""
    body = {"election_type": ELECTION_TYPES[election], "timeout": TIMEOUT_MS,
            "topic_partitions": None if partitions is None else [
                {"topic": t, "partitions": [p for p, _ in ps]}
                for t, ps in _by_topic(dict.fromkeys(partitions)).items()]}
    resp = admin.controller().call(ELECT_LEADERS, body)
    check(resp.error_code)
    rows = [{"topic": r.topic, "partition": int(p.partition_id),
             "result": "ELECTED" if p.error_code == ErrorCode.none
             else error_name(p.error_code), "message": p.error_message}
            for r in resp.replica_election_results for p in r.partition_result]
    rows.sort(key=lambda r: (r["topic"], r["partition"]))
    failed = [r for r in rows if r["result"] not in ("ELECTED", "ELECTION_NOT_NEEDED")]
    if failed:
        f = failed[0]
        raise AdminError(f["result"], f"{f['topic']}-{f['partition']}: "
                         f"{f['message'] or 'no leader elected'}"
                         + (f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""))
    return rows
