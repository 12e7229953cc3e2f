"""`samsa group reset-offsets` and `samsa group delete`, as kafka-consumer-groups.sh
--reset-offsets and --delete do them: the new offsets are planned from ListOffsets and the
group's committed offsets, printed (a dry run, the default), and with --execute committed by
OffsetCommit as an admin commit (no member, generation -1), which a broker accepts only from
outside an active group. A share group's offsets are its share-partitions' start offsets
(DescribeShareGroupOffsets), set by AlterShareGroupOffsets, as kafka-share-groups.sh
--reset-offsets does; it too must be empty."""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any

from samsa.protocol.errors import ErrorCode

from . import groups, topics
from .client import Admin, AdminError, KafkaRequestError, check, retrying

OFFSET_COMMIT, DELETE_GROUPS, ALTER_SHARE_GROUP_OFFSETS = 8, 42, 91
INACTIVE = ("Empty", "Dead")  # the states kafka-consumer-groups.sh resets offsets in

Partitions = set[tuple[str, int]]


@dataclass(frozen=True)
class Strategy:
    """Where to move each partition: earliest, latest, offset, datetime or shift (by value)."""

    kind: str
    value: int = 0


def parse_datetime(text: str) -> int:
    """`--to-datetime` as Kafka's tool reads it (YYYY-MM-DDTHH:mm:SS.sss, an optional zone
    such as Z or +02:00; local time without one) -> epoch milliseconds."""
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError as e:
        raise AdminError("INVALID_CONFIG", f"--to-datetime {text!r}: want "
                         "YYYY-MM-DDTHH:mm:SS.sss, optionally with a zone") from e
    return int(when.timestamp() * 1000)


def parse_topic(spec: str) -> tuple[str, list[int] | None]:
    """`TOPIC` (every partition) or `TOPIC:0,2` (those)."""
    topic, sep, parts = spec.partition(":")
    if not sep:
        return topic, None
    try:
        return topic, sorted({int(p) for p in parts.split(",")})
    except ValueError as e:
        raise AdminError("INVALID_CONFIG", f"--topic {spec!r}: want TOPIC or "
                         "TOPIC:PARTITION,...") from e


def _state(admin: Admin, group: str) -> tuple[str | None, str]:
    """The group's type and state (Dead when the coordinator does not know it)."""
    try:
        info = groups.describe(admin, group)
    except KafkaRequestError as e:
        if e.code == ErrorCode.group_id_not_found:
            return None, "Dead"
        raise
    return info["type"], str(info["state"])


def _partitions(admin: Admin, specs: list[str], committed: Partitions) -> Partitions:
    """The partitions named by --topic (every partition of a topic named alone), or with no
    --topic (--all-topics) those the group has committed offsets for."""
    if not specs:
        return set(committed)
    wanted = [parse_topic(s) for s in specs]
    known = {t.name: t for t in admin.metadata([t for t, _ in wanted]).topics}
    out: Partitions = set()
    for topic, parts in wanted:
        t = known[topic]
        topics.check_found(t)
        have = {int(p.partition_index) for p in t.partitions}
        missing = set(parts or ()) - have
        if missing:
            raise KafkaRequestError(ErrorCode.unknown_topic_or_partition,
                                    f"{topic} has no partition {min(missing)}")
        out |= {(topic, p) for p in (parts if parts is not None else have)}
    return out


def plan(admin: Admin, partitions: Partitions, committed: dict[tuple[str, int], int],
         strategy: Strategy) -> dict[tuple[str, int], int]:
    """Each partition's new offset, kept within its log (as the tool's checkOffsetsRange)."""
    start = _known(groups.offsets_at(admin, partitions, groups.EARLIEST), partitions)
    end = _known(groups.offsets_at(admin, partitions, groups.LATEST), partitions)
    if strategy.kind == "earliest":
        return {tp: start[tp] for tp in partitions}
    if strategy.kind == "latest":
        return {tp: end[tp] for tp in partitions}
    if strategy.kind == "datetime":
        found = groups.offsets_at(admin, partitions, strategy.value)
        return {tp: end[tp] if found[tp] < 0 else found[tp] for tp in partitions}
    if strategy.kind == "shift":
        lacking = sorted(partitions - set(committed))
        if lacking:
            raise AdminError("INVALID_OFFSET", "cannot shift the offset of {}-{}: the group "
                             "has committed none".format(*lacking[0]))
        wanted = {tp: committed[tp] + strategy.value for tp in partitions}
    else:
        wanted = {tp: strategy.value for tp in partitions}
    return {tp: min(max(offset, start[tp]), end[tp]) for tp, offset in wanted.items()}


def _known(offsets: dict[tuple[str, int], int], partitions: Partitions
           ) -> dict[tuple[str, int], int]:
    lacking = sorted(partitions - set(offsets))
    if lacking:
        raise AdminError("LEADER_NOT_AVAILABLE", "no offsets of {}-{}: its leader did not "
                         "answer".format(*lacking[0]))
    return offsets


def commit(admin: Admin, group: str, offsets: dict[tuple[str, int], int],
           generation: int = -1, member_id: str = "") -> None:
    """Commit `offsets` for the group: as an admin (no member, generation -1), or as the
    member given."""
    topics: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        topics.setdefault(topic, []).append({
            "partition_index": partition, "committed_offset": offset,
            "committed_leader_epoch": -1, "committed_metadata": ""})
    body = {"group_id": group, "generation_id_or_member_epoch": generation,
            "generation_id": generation, "member_id": member_id, "group_instance_id": None,
            "retention_time_ms": -1,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}

    def attempt() -> None:
        for t in admin.coordinator(group).call(OFFSET_COMMIT, body).topics:
            for p in t.partitions:
                check(p.error_code)

    retrying(admin.settings, attempt)


def alter_share(admin: Admin, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """AlterShareGroupOffsets (KIP-932): each share-partition starts again at its offset, as
    kafka-share-groups.sh --reset-offsets --execute sets them (the group must be empty)."""
    topics: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        topics.setdefault(topic, []).append({"partition_index": partition,
                                             "start_offset": offset})
    body = {"group_id": group,
            "topics": [{"topic_name": t, "partitions": ps} for t, ps in topics.items()]}

    def attempt() -> None:
        resp = admin.coordinator(group).call(ALTER_SHARE_GROUP_OFFSETS, body)
        check(resp.error_code, resp.error_message)
        for t in resp.responses:
            for p in t.partitions:
                check(p.error_code, p.error_message)

    retrying(admin.settings, attempt)


def reset(admin: Admin, group: str, topic_specs: list[str], strategy: Strategy,
          execute: bool) -> list[dict[str, Any]]:
    kind, state = _state(admin, group)
    if state not in INACTIVE:
        raise AdminError("NON_EMPTY_GROUP", f"Assignments can only be reset if the group "
                         f"'{group}' is inactive, but the current state is {state}.")
    conn = retrying(admin.settings, lambda: admin.coordinator(group))
    share = kind == "share"
    committed = (groups.share_start_offsets(admin, conn, group) if share
                 else groups.committed_offsets(conn, group))
    partitions = _partitions(admin, topic_specs, set(committed))
    offsets = plan(admin, partitions, committed, strategy)
    if execute and offsets:
        (alter_share if share else commit)(admin, group, offsets)
    return [{"group_id": group, "topic": t, "partition": p, "new_offset": offsets[(t, p)]}
            for t, p in sorted(offsets)]


def delete(admin: Admin, group: str) -> dict[str, Any]:
    def attempt() -> None:
        resp = admin.coordinator(group).call(DELETE_GROUPS, {"groups_names": [group]})
        (result,) = resp.results
        check(result.error_code, _delete_message(result.error_code, group))

    retrying(admin.settings, attempt)
    return {"group_id": group, "deleted": True}


def _delete_message(code: int, group: str) -> str | None:
    if code == ErrorCode.non_empty_group:
        return f"The group {group} is not empty."
    if code == ErrorCode.group_id_not_found:
        return f"Group {group} not found."
    return None
