"""`samsa group list|describe`: groups of the four kinds (classic, consumer as in KIP-848,
share as in KIP-932, streams as in KIP-1071) as ListGroups v5, DescribeGroups,
ConsumerGroupDescribe, ShareGroupDescribe and StreamsGroupDescribe (only where the broker
lists it in ApiVersions) report them, with each partition's committed offset, log end offset
and lag. A streams member's assignment is the source topics' partitions of its active tasks."""

from __future__ import annotations

import struct
from collections import defaultdict
from functools import partial
from typing import Any

from samsa.protocol.errors import ErrorCode

from .client import Admin, AdminError, Connection, KafkaRequestError, check, retrying

LIST_GROUPS, DESCRIBE_GROUPS, OFFSET_FETCH, LIST_OFFSETS = 16, 15, 9, 2
CONSUMER_GROUP_DESCRIBE, SHARE_GROUP_DESCRIBE, DESCRIBE_SHARE_GROUP_OFFSETS = 69, 77, 90
STREAMS_GROUP_DESCRIBE = 89
LATEST, EARLIEST = -1, -2  # ListOffsets timestamps of the log end and log start offsets


def list_groups(admin: Admin, types: list[str], states: list[str]) -> list[dict[str, Any]]:
    """Every broker's groups (each coordinator knows only its own), filtered by type and state
    the way ListGroups v4/v5 filters them."""
    found: dict[str, dict[str, Any]] = {}
    body = {"states_filter": states, "types_filter": types}
    for node_id in sorted(admin.brokers()):
        resp = retrying(admin.settings, partial(_listed, admin.node(node_id), body))
        for g in resp.groups:
            if not _wanted(g, types, states):
                continue
            found[g.group_id] = {
                "group_id": g.group_id, "type": getattr(g, "group_type", "") or None,
                "protocol_type": g.protocol_type,
                "state": getattr(g, "group_state", "") or None, "coordinator": node_id}
    return [found[k] for k in sorted(found)]


def _listed(conn: Connection, body: dict[str, Any]) -> Any:
    resp = conn.call(LIST_GROUPS, body)
    check(resp.error_code)
    return resp


def _wanted(group: Any, types: list[str], states: list[str]) -> bool:
    """The filters again on our side: a broker before ListGroups v4 (states) or v5 (types)
    ignores them."""
    state, kind = getattr(group, "group_state", ""), getattr(group, "group_type", "")
    return ((not states or not state or state.lower() in {s.lower() for s in states})
            and (not types or not kind or kind.lower() in {t.lower() for t in types}))


# ---- describe ------------------------------------------------------------------------------


def describe(admin: Admin, group: str) -> dict[str, Any]:
    return retrying(admin.settings, lambda: _describe(admin, group))


def _describe(admin: Admin, group: str) -> dict[str, Any]:
    conn = admin.coordinator(group)
    # KIP-848 and KIP-932 groups answer their own describe; either answers GROUP_ID_NOT_FOUND
    # for a group of another kind (as Kafka's Admin client finds out too).
    info = (_describe_new(conn, CONSUMER_GROUP_DESCRIBE, group, "consumer")
            or _describe_new(conn, SHARE_GROUP_DESCRIBE, group, "share")
            or _describe_streams(conn, group)
            or _describe_classic(conn, group))
    if info["type"] == "share":
        committed, lags = _share_offsets(admin, conn, group)
    else:
        committed, lags = committed_offsets(conn, group), {}
    assigned = _owners(info["members"])
    ends = _log_end_offsets(admin, set(committed) | set(assigned))
    rows = []
    for tp in sorted(set(committed) | set(assigned)):
        current, end = committed.get(tp), ends.get(tp)
        lag = lags.get(tp, None if current is None or end is None else max(end - current, 0))
        member = assigned.get(tp, {})
        rows.append({"topic": tp[0], "partition": tp[1], "current_offset": current,
                     "log_end_offset": end, "lag": lag, "member_id": member.get("member_id"),
                     "client_id": member.get("client_id"), "host": member.get("host")})
    return {**info, "offsets": rows}


def _owners(members: list[dict[str, Any]]) -> dict[tuple[str, int], dict[str, Any]]:
    """Each assigned partition's member; {} for a partition members share (a share group's
    may be assigned to many)."""
    out: dict[tuple[str, int], dict[str, Any]] = {}
    for m in members:
        for a in m["assignment"]:
            for p in a["partitions"]:
                out[(a["topic"], p)] = {} if (a["topic"], p) in out else m
    return out


def _describe_new(conn: Connection, api_key: int, group: str, kind: str) -> dict[str, Any] | None:
    if not conn.supports(api_key):
        return None
    (g,) = conn.call(api_key, {"group_ids": [group],
                               "include_authorized_operations": False}).groups
    if g.error_code == ErrorCode.group_id_not_found:
        return None
    check(g.error_code, g.error_message)
    members = [{"member_id": m.member_id, "client_id": m.client_id, "host": m.client_host,
                "member_epoch": int(m.member_epoch),
                "subscribed_topics": list(m.subscribed_topic_names),
                "assignment": [{"topic": tp.topic_name, "partitions": sorted(tp.partitions)}
                               for tp in m.assignment.topic_partitions]}
               for m in g.members]
    return {"group_id": group, "type": kind, "state": g.group_state,
            "protocol_type": kind, "assignor": g.assignor_name or None,
            "group_epoch": int(g.group_epoch), "members": members}


def _describe_streams(conn: Connection, group: str) -> dict[str, Any] | None:
    if not conn.supports(STREAMS_GROUP_DESCRIBE):
        return None
    (g,) = conn.call(STREAMS_GROUP_DESCRIBE, {"group_ids": [group],
                                              "include_authorized_operations": False},
                     0).groups  # v0's field names
    if g.error_code == ErrorCode.group_id_not_found:
        return None
    check(g.error_code, g.error_message)
    subtopologies = (g.topology.subtopologies if g.topology is not None else None) or ()
    sources = {s.subtopology_id: [*s.source_topics,
                                  *(t.name for t in s.repartition_source_topics)]
               for s in subtopologies}
    members = [{"member_id": m.member_id, "client_id": m.client_id, "host": m.client_host,
                "member_epoch": int(m.member_epoch), "subscribed_topics": None,
                "assignment": _task_partitions(m.assignment.active_tasks, sources)}
               for m in g.members]
    return {"group_id": group, "type": "streams", "state": g.group_state,
            "protocol_type": "streams", "assignor": None, "group_epoch": int(g.group_epoch),
            "members": members}


def _task_partitions(tasks: Any, sources: dict[str, list[str]]) -> list[dict[str, Any]]:
    """Active tasks (subtopology, partitions) as the partitions of each one's source topics."""
    out: dict[str, set[int]] = defaultdict(set)
    for task in tasks:
        for topic in sources.get(task.subtopology_id, []):
            out[topic] |= {int(p) for p in task.partitions}
    return [{"topic": t, "partitions": sorted(ps)} for t, ps in sorted(out.items())]


def _describe_classic(conn: Connection, group: str) -> dict[str, Any]:
    (g,) = conn.call(DESCRIBE_GROUPS, {"groups": [group],
                                       "include_authorized_operations": False}).groups
    check(g.error_code, getattr(g, "error_message", None))
    if g.group_state == "Dead":  # DescribeGroups before v6 answers an unknown group so
        raise KafkaRequestError(ErrorCode.group_id_not_found, f"Group {group} not found.")
    members = [{"member_id": m.member_id, "client_id": m.client_id, "host": m.client_host,
                "member_epoch": None, "subscribed_topics": None,
                "assignment": consumer_assignment(m.member_assignment)
                if g.protocol_type == "consumer" else []}
               for m in g.members]
    return {"group_id": group, "type": "classic", "state": g.group_state,
            "protocol_type": g.protocol_type, "assignor": g.protocol_data or None,
            "group_epoch": None, "members": members}


def consumer_assignment(data: bytes) -> list[dict[str, Any]]:
    """A classic consumer's assignment (ConsumerProtocolAssignment: version, then
    [topic, [partition]]); the user data after it is not ours to read."""
    if len(data) < 6:
        return []
    out = []
    (count,) = struct.unpack_from(">i", data, 2)
    pos = 6
    for _ in range(count):
        (n,) = struct.unpack_from(">h", data, pos)
        topic = data[pos + 2 : pos + 2 + n].decode()
        (k,) = struct.unpack_from(">i", data, pos + 2 + n)
        partitions = struct.unpack_from(f">{k}i", data, pos + 6 + n)
        pos += 6 + n + 4 * k
        out.append({"topic": topic, "partitions": sorted(partitions)})
    return out


# ---- offsets -------------------------------------------------------------------------------


def committed_offsets(conn: Connection, group: str) -> dict[tuple[str, int], int]:
    v = conn.version(OFFSET_FETCH)
    body = {"group_id": group, "topics": None, "require_stable": False,
            "groups": [{"group_id": group, "member_id": None, "member_epoch": -1,
                        "topics": None}]}
    resp = conn.call(OFFSET_FETCH, body, v)
    answer = resp.groups[0] if v >= 8 else resp
    check(answer.error_code)
    out = {}
    for t in answer.topics:
        for p in t.partitions:
            check(p.error_code)
            if p.committed_offset >= 0:
                out[(t.name, int(p.partition_index))] = int(p.committed_offset)
    return out


def _share_offsets(admin: Admin, conn: Connection, group: str
                   ) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], int]]:
    """A share group's start offsets and, where the broker says (v1), its lag."""
    if not conn.supports(DESCRIBE_SHARE_GROUP_OFFSETS):
        return {}, {}
    resp = conn.call(DESCRIBE_SHARE_GROUP_OFFSETS, {"groups": [{"group_id": group,
                                                                "topics": None}]})
    g = resp.groups[0]
    check(g.error_code, g.error_message)
    starts, lags = {}, {}
    for t in g.topics:
        for p in t.partitions:
            check(p.error_code, p.error_message)
            if p.start_offset >= 0:
                starts[(t.topic_name, int(p.partition_index))] = int(p.start_offset)
                if getattr(p, "lag", -1) >= 0:
                    lags[(t.topic_name, int(p.partition_index))] = int(p.lag)
    return starts, lags


def share_start_offsets(admin: Admin, conn: Connection, group: str
                        ) -> dict[tuple[str, int], int]:
    """A share group's start offsets (none where the broker lacks share groups)."""
    return _share_offsets(admin, conn, group)[0]


def _log_end_offsets(admin: Admin, partitions: set[tuple[str, int]]
                     ) -> dict[tuple[str, int], int]:
    return offsets_at(admin, partitions, LATEST)


def offsets_at(admin: Admin, partitions: set[tuple[str, int]], timestamp: int
               ) -> dict[tuple[str, int], int]:
    """Each partition's offset at `timestamp` (LATEST, EARLIEST or milliseconds: the first
    offset at or after it, -1 when there is none), asked of its leader."""
    if not partitions:
        return {}
    leaders: dict[int, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for t in admin.metadata(sorted({t for t, _ in partitions})).topics:
        for p in t.partitions:
            if (t.name, p.partition_index) in partitions and p.leader_id >= 0:
                leaders[int(p.leader_id)][t.name].append(int(p.partition_index))
    out = {}
    for leader, topics in leaders.items():
        body = {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": t, "partitions": [{"partition_index": p, "current_leader_epoch": -1,
                                        "timestamp": timestamp} for p in ps]}
            for t, ps in topics.items()]}
        try:
            resp = admin.node(leader).call(LIST_OFFSETS, body)
        except AdminError:
            continue  # an unreachable leader: its partitions show no log end offset
        for t in resp.topics:
            for p in t.partitions:
                if p.error_code == ErrorCode.none:
                    out[(t.name, int(p.partition_index))] = int(p.offset)
    return out
