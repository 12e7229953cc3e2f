"""`samsa produce` and `samsa consume`: records written and read with the Produce and Fetch
APIs on the project's own record batches (protocol/records.py), so neither needs librdkafka.

produce: one record per stdin line (key and value split at --key-separator), to the partition
given, else by the key as Kafka's default partitioner does (murmur2), else round robin; one
batch per partition and request, compressed with --compression's codec. With
--transactional-id the records are one transaction (InitProducerId, AddPartitionsToTxn,
Produce, EndTxn), committed at the end.

consume: from each partition's start (--from-beginning), a given --offset, the group's committed
offsets (--group) or else the end, up to the end offset seen when it starts (the last stable
offset with read_committed, where aborted transactions are skipped as a Java consumer skips
them) or -n records; with --follow past the end until interrupted. With --group the command
joins the classic group (membership.py), reads the partitions it is assigned (heartbeating),
commits the offsets reached as that member and leaves.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

from samsa.protocol.compression import CODEC_NAMES
from samsa.protocol.records import (
    CONTROL_ABORT,
    build_batch,
    decode_records,
    iter_batches,
    parse_control_record,
)

from . import groups, membership, offsets, topics
from .client import TXN_KEY, Admin, AdminError, Connection, check, retrying

PRODUCE, FETCH, INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, END_TXN = 0, 1, 22, 24, 26
ACKS = {"0": 0, "1": 1, "all": -1, "-1": -1}
BATCH_RECORDS = 1000  # records per batch (and request)
FETCH_MAX_BYTES = 1 << 20
TXN_TIMEOUT_MS = 60_000
FOLLOW_WAIT_MS = 500  # how long a --follow Fetch waits at the end of a partition
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
CODECS = {name: code for code, name in CODEC_NAMES.items()}  # compression.type's names
TP = tuple[str, int]
Line = tuple[bytes | None, bytes, list[tuple[str, bytes]]]


# ---- partitioning --------------------------------------------------------------------------


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (Utils.murmur2, seed 0x9747b28c), as a signed 32-bit int."""
    m, r, mask = 0x5BD1E995, 24, 0xFFFFFFFF
    h = (0x9747B28C ^ len(data)) & mask
    n = len(data) // 4
    for i in range(n):
        k = int.from_bytes(data[4 * i : 4 * i + 4], "little")
        k = (k * m) & mask
        k ^= k >> r
        k = (k * m) & mask
        h = ((h * m) & mask) ^ k
    tail = data[4 * n :]
    if len(tail) >= 3:
        h ^= tail[2] << 16
    if len(tail) >= 2:
        h ^= tail[1] << 8
    if tail:
        h ^= tail[0]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(key: bytes | None, count: int, turn: int) -> int:
    """Kafka's default partitioner for a keyed record (murmur2 of the key, its sign bit
    cleared); round robin (turn) without a key."""
    if key is None:
        return turn % count
    return (murmur2(key) & 0x7FFFFFFF) % count


def parse_lines(lines: Iterable[str], key_separator: str | None,
                headers: list[tuple[str, bytes]]) -> list[Line]:
    out = []
    for raw in lines:
        line = raw.rstrip("\n")
        key: bytes | None = None
        if key_separator is not None:
            k, sep, v = line.partition(key_separator)
            if not sep:
                raise AdminError("INVALID_RECORD", f"no key separator {key_separator!r} in "
                                 f"{line!r}")
            key, line = k.encode(), v
        out.append((key, line.encode(), headers))
    return out


# ---- produce -------------------------------------------------------------------------------


def _layout(admin: Admin, topic: str) -> dict[int, int]:
    """partition -> leader of `topic`."""
    (t,) = admin.metadata([topic]).topics
    topics.check_found(t)
    return {int(p.partition_index): int(p.leader_id) for p in t.partitions}


class _Txn:
    """One transaction of `transactional_id`: its producer id and epoch, and the partitions
    added to it."""

    def __init__(self, admin: Admin, transactional_id: str) -> None:
        self.admin, self.id = admin, transactional_id
        body = {"transactional_id": transactional_id, "transaction_timeout": TXN_TIMEOUT_MS,
                "producer_id": -1, "producer_epoch": -1}

        def init() -> Any:
            resp = self.coordinator().call(INIT_PRODUCER_ID, body)
            check(resp.error_code)
            return resp

        resp = retrying(admin.settings, init)
        self.producer_id, self.epoch = int(resp.producer_id), int(resp.producer_epoch)

    def coordinator(self) -> Connection:
        return self.admin.coordinator(self.id, TXN_KEY)

    def add(self, topic: str, partitions: list[int]) -> None:
        body = {"v3_and_below_transactional_id": self.id,
                "v3_and_below_producer_id": self.producer_id,
                "v3_and_below_producer_epoch": self.epoch,
                "v3_and_below_topics": [{"name": topic, "partitions": partitions}]}
        resp = self.coordinator().call(ADD_PARTITIONS_TO_TXN, body)
        for t in resp.results_by_topic_v3_and_below:
            for p in t.results_by_partition:
                check(p.partition_error_code)

    def end(self, commit: bool) -> None:
        resp = self.coordinator().call(END_TXN, {
            "transactional_id": self.id, "producer_id": self.producer_id,
            "producer_epoch": self.epoch, "committed": commit})
        check(resp.error_code)


def produce(admin: Admin, topic: str, records: list[Line], partition: int | None = None,
            acks: str = "all", transactional_id: str | None = None,
            compression: str = "none") -> dict[str, Any]:
    if acks not in ACKS:
        raise AdminError("INVALID_CONFIG", f"acks {acks!r}: 0, 1 or all")
    if compression not in CODECS:
        raise AdminError("INVALID_CONFIG", f"compression {compression!r}: one of "
                         f"{', '.join(CODECS)}")
    leaders = _layout(admin, topic)
    if partition is not None and partition not in leaders:
        raise AdminError("UNKNOWN_TOPIC_OR_PARTITION", f"{topic} has no partition {partition}")
    by_partition: dict[int, list[Line]] = defaultdict(list)
    for i, rec in enumerate(records):
        by_partition[partition if partition is not None else
                     partition_for(rec[0], len(leaders), i)].append(rec)
    txn = _Txn(admin, transactional_id) if transactional_id else None
    if txn is not None:
        txn.add(topic, sorted(by_partition))
    results = []
    try:
        for p in sorted(by_partition):
            results.append(_produce_partition(admin, topic, p, leaders[p], by_partition[p],
                                              ACKS[acks], txn, CODECS[compression]))
    except AdminError:
        if txn is not None:
            txn.end(commit=False)
        raise
    if txn is not None:
        txn.end(commit=True)
    return {"topic": topic, "records": len(records), "transactional_id": transactional_id,
            "partitions": results}


def _produce_partition(admin: Admin, topic: str, partition: int, leader: int,
                       records: list[Line], acks: int, txn: _Txn | None,
                       codec: int) -> dict[str, Any]:
    base: int | None = None
    now = int(time.time() * 1000)
    for start in range(0, len(records), BATCH_RECORDS):
        chunk = records[start : start + BATCH_RECORDS]
        rows = [(k, v, h, now) for k, v, h in chunk]
        batch = build_batch(rows, compression=codec) if txn is None else build_batch(
            rows, producer_id=txn.producer_id, producer_epoch=txn.epoch, base_sequence=start,
            transactional=True, compression=codec)
        body = {"transactional_id": None if txn is None else txn.id, "acks": acks,
                "timeout": 30_000, "topic_data": [{"name": topic, "partition_data": [
                    {"index": partition, "records": batch}]}]}
        resp = admin.node(leader).call(PRODUCE, body, answered=acks != 0)
        if resp is None:
            continue
        (p,) = resp.responses[0].partition_responses
        check(p.error_code, p.error_message)
        base = int(p.base_offset) if base is None else base
    return {"partition": partition, "base_offset": base, "count": len(records)}


# ---- consume -------------------------------------------------------------------------------


def _starts(admin: Admin, partitions: set[TP], group: str | None, from_beginning: bool,
            offset: int | None) -> dict[TP, int]:
    earliest = groups.offsets_at(admin, partitions, groups.EARLIEST)
    if offset is not None:
        return {tp: max(offset, earliest.get(tp, 0)) for tp in partitions}
    fallback = earliest if from_beginning else groups.offsets_at(admin, partitions,
                                                                  groups.LATEST)
    committed: dict[TP, int] = {}
    if group is not None:
        conn = retrying(admin.settings, lambda: admin.coordinator(group))
        committed = groups.committed_offsets(conn, group)
    return {tp: committed.get(tp, fallback.get(tp, 0)) for tp in partitions}


def _checked_layout(admin: Admin, topic: str, partition: int | None,
                    group: str | None) -> dict[int, int]:
    leaders = _layout(admin, topic)
    if partition is not None and partition not in leaders:
        raise AdminError("UNKNOWN_TOPIC_OR_PARTITION", f"{topic} has no partition {partition}")
    if partition is not None and group is not None:
        raise AdminError("INVALID_CONFIG", "--partition and --group exclude each other: the "
                         "group assigns the partitions")
    return leaders


def consume(admin: Admin, topic: str, partition: int | None = None,
            from_beginning: bool = False, offset: int | None = None, group: str | None = None,
            isolation: str = "read_uncommitted", limit: int | None = None
            ) -> list[dict[str, Any]]:
    leaders = _checked_layout(admin, topic, partition, group)
    if group is None:
        chosen = {(topic, p) for p in leaders if partition is None or p == partition}
        return _read(admin, leaders, chosen, group, from_beginning, offset, isolation, limit)
    member = membership.Member(admin, group, topic)
    try:
        assigned = {(topic, p) for p in member.join()}
        return _read(admin, leaders, assigned, group, from_beginning, offset, isolation, limit,
                     member)
    finally:
        member.leave()


def follow(admin: Admin, topic: str, emit: Callable[[dict[str, Any]], None],
           partition: int | None = None, from_beginning: bool = False,
           offset: int | None = None, group: str | None = None,
           isolation: str = "read_uncommitted", limit: int | None = None,
           stop: Callable[[], bool] = lambda: False) -> int:
    """--follow: emit each record as it comes, fetching on past the end until `limit`
    records, stop() or an interrupt (KeyboardInterrupt); with a group the member heartbeats,
    commits and joins again when the group rebalances, and commits and leaves at the end.
    Returns how many records it emitted."""
    leaders = _checked_layout(admin, topic, partition, group)
    level = READ_COMMITTED if isolation == "read_committed" else 0
    member = None if group is None else membership.Member(admin, group, topic)
    chosen = {(topic, p) for p in (member.join() if member is not None else leaders)
              if partition is None or p == partition}
    position = _starts(admin, chosen, group, from_beginning, offset)
    count = 0
    try:
        while not stop() and (limit is None or count < limit):
            if member is not None and not member.heartbeat():
                _commit(admin, member, position)
                chosen = {(topic, p) for p in member.join()}
                position = _starts(admin, chosen, group, from_beginning, offset)
            if not position:  # nothing assigned (more members than partitions): wait
                time.sleep(FOLLOW_WAIT_MS / 1000)
            for tp in sorted(position):
                room = None if limit is None else limit - count
                position[tp], shown = _follow_once(admin.node(leaders[tp[1]]), tp,
                                                   position[tp], level, room, emit)
                count += shown
    except KeyboardInterrupt:
        admin.close()  # a response may be half read: the commit below opens new connections
        raise
    finally:
        if member is not None:
            _commit(admin, member, position)
            member.leave()
    return count


def _follow_once(conn: Connection, tp: TP, position: int, level: int, room: int | None,
                 emit: Callable[[dict[str, Any]], None]) -> tuple[int, int]:
    """One waiting Fetch of `tp`: its records emitted (at most `room`); the next position
    and how many were emitted."""
    fetched, _ = fetch(conn, tp, position, level, FOLLOW_WAIT_MS)
    shown = 0
    for record in _visible(fetched):
        if record["offset"] >= position and (room is None or shown < room):
            emit(record)
            shown += 1
            position = record["offset"] + 1
    if room is None or shown < room:
        position = max(position, fetched["next"])
    return position, shown


def _commit(admin: Admin, member: membership.Member, position: dict[TP, int]) -> None:
    if position:
        offsets.commit(admin, member.group, position, member.generation, member.member_id)


def _read(admin: Admin, leaders: dict[int, int], partitions: set[TP], group: str | None,
          from_beginning: bool, offset: int | None, isolation: str, limit: int | None,
          member: membership.Member | None = None) -> list[dict[str, Any]]:
    level = READ_COMMITTED if isolation == "read_committed" else 0
    position = _starts(admin, partitions, group, from_beginning, offset)
    out: list[dict[str, Any]] = []
    for tp in sorted(partitions):
        if limit is not None and len(out) >= limit:
            break
        records, position[tp] = _read_partition(admin, tp, leaders[tp[1]], position[tp], level,
                                                None if limit is None else limit - len(out),
                                                member)
        out += records
    if member is not None:
        _commit(admin, member, position)
    return out


def _read_partition(admin: Admin, tp: TP, leader: int, start: int, level: int,
                    limit: int | None, member: membership.Member | None = None
                    ) -> tuple[list[dict[str, Any]], int]:
    """Records of one partition from `start` up to its end (high watermark, or last stable
    offset with read_committed) when first fetched; and the offset after the last read. A
    group member heartbeats between fetches (a rebalance meanwhile shows when it commits)."""
    out: list[dict[str, Any]] = []
    position, end = start, None
    while (end is None or position < end) and (limit is None or len(out) < limit):
        if member is not None:
            member.heartbeat()
        fetched, end = fetch(admin.node(leader), tp, position, level)
        if not fetched["batches"] and position >= end:
            break
        for record in _visible(fetched):
            if record["offset"] >= position and record["offset"] < end and (
                    limit is None or len(out) < limit):
                out.append(record)
        position = max(position, fetched["next"])
    last = out[-1]["offset"] + 1 if out and limit is not None and len(out) >= limit else position
    return out, min(last, end) if end is not None else last


def fetch(conn: Connection, tp: TP, offset: int, level: int, wait_ms: int = 0
          ) -> tuple[dict[str, Any], int]:
    """One Fetch of `tp` from `offset` (its batches, aborted transactions and the offset
    after its last batch) and the partition's end (high watermark, or last stable offset
    with read_committed); with `wait_ms` the broker holds it that long for a first byte."""
    body = {"replica_id": -1, "max_wait": wait_ms, "min_bytes": 1 if wait_ms else 0,
            "max_bytes": FETCH_MAX_BYTES,
            "isolation_level": level, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": tp[0], "partitions": [{
                "partition": tp[1], "fetch_offset": offset, "partition_max_bytes":
                FETCH_MAX_BYTES, "current_leader_epoch": -1, "log_start_offset": -1,
                "last_fetched_epoch": -1}]}],
            "forgotten_topics_data": [], "rack_id": ""}
    resp = conn.call(FETCH, body)
    check(resp.error_code)
    (p,) = resp.responses[0].partitions
    check(p.error_code)
    end = int(p.last_stable_offset) if level == READ_COMMITTED else int(p.high_watermark)
    data = bytes(p.records or b"")
    batches = list(iter_batches(data))
    aborted = [(int(a.producer_id), int(a.first_offset))
               for a in (p.aborted_transactions or ())]
    following = batches[-1][1].next_offset if batches else offset
    return {"tp": tp, "data": data, "batches": batches, "aborted": aborted,
            "next": following}, end


def _visible(fetched: dict[str, Any]) -> list[dict[str, Any]]:
    """The data records of a fetch, leaving out control batches and, with read_committed, the
    batches of aborted transactions (each from its first offset to its abort marker)."""
    data, pending = fetched["data"], sorted(fetched["aborted"], key=lambda a: a[1])
    aborting: set[int] = set()
    out = []
    for pos, h in fetched["batches"]:
        while pending and pending[0][1] <= h.last_offset:
            aborting.add(pending.pop(0)[0])
        if h.is_control:
            if h.producer_id in aborting and parse_control_record(data, pos, h)[0] == CONTROL_ABORT:
                aborting.discard(h.producer_id)
            continue
        if h.is_transactional and h.producer_id in aborting:
            continue
        topic, partition = fetched["tp"]
        out += [{"topic": topic, "partition": partition, "offset": r.offset,
                 "timestamp": r.timestamp, "key": _text(r.key), "value": _text(r.value),
                 "headers": {k: _text(v) for k, v in r.headers}}
                for r in decode_records(data, pos, h)]
    return out


def raw_records(fetched: dict[str, Any]) -> list[dict[str, Any]]:
    """Every data record of a fetch (markers left out, aborted ones kept) with its key, value
    and headers as bytes, and whether its batch is transactional."""
    data, out = fetched["data"], []
    for pos, h in fetched["batches"]:
        if not h.is_control:
            out += [{"offset": r.offset, "timestamp": r.timestamp, "key": r.key,
                     "value": r.value, "headers": r.headers,
                     "transactional": h.is_transactional}
                    for r in decode_records(data, pos, h)]
    return out


def _text(value: bytes | None) -> str | None:
    return None if value is None else value.decode("utf-8", "backslashreplace")
