"""Durable share-group state (KIP-932) across a kill -9 of the share-partition leader (or of its
share coordinator).

Three brokers, a topic of replication factor 3, a share group of two members reading it from
the earliest offset, the share-partition's leader and its share coordinator (the leader of its
`__share_group_state` partition) on different brokers. The members fetch and accept records
with raw ShareFetch requests (the acknowledgements of one round ride on the next fetch), so the
history knows exactly which acknowledgements the leader confirmed. In the middle of the stream,
right after both members acquired records they have not acknowledged, the partition's leader
(or the share coordinator) is killed with SIGKILL; the members follow the partition to its
leader (a new share session there, joining the group again if its coordinator went with the
killed broker) and read on.

The checker over the history: no record is delivered again once its acceptance was confirmed
(the share-partition state came back from `__share_group_state`, not from the start offset);
every record is accepted in the end (nothing lost), those in flight at a leader's kill
included (delivered again); an acknowledgement whose answer was lost with the connection may
have taken effect or not, so only its record may be either never seen again or delivered again.

The main driver is a raw-protocol client: the checker needs to know which acknowledgement each
answer confirmed, and the kill must fall between an acquisition and its acknowledgement. The
Java KafkaShareConsumer runs the same scenario too (its commitSync results say which
acknowledgements were confirmed), with less control over where the kill falls.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest

from samsa.protocol.records import decode_records, iter_batches
from samsa.protocol.uuids import kafka_uuid_string
from tests.cluster.cluster import (
    GROUP_KEY,
    Cluster,
    create_topic,
    find_coordinators,
    wait_until,
)
from tests.protocol.wire import WireClient
from tests.support.java import JAVA_SRC, JavaProcess, compile_java

pytestmark = pytest.mark.timeout(120)
log = logging.getLogger(__name__)

SHARE_HEARTBEAT, SHARE_FETCH, FIND_COORDINATOR = 76, 78, 10
SHARE_KEY = 2  # FindCoordinator key type of share-partitions
NONE, UNKNOWN_MEMBER_ID, INVALID_RECORD_STATE = 0, 25, 121
ACCEPT = 1
RECORDS = 240
JAVA_RECORDS = 150
SETTINGS: dict[str, object] = {
    "share.coordinator.state.topic.num.partitions": 3,
    "group.share.heartbeat.interval.ms": 1000,
}


@dataclass
class Member:
    member_id: str
    leader: int = -1
    conn: WireClient | None = None
    epoch: int = 0  # the share session epoch of the next request
    pending: list[int] = field(default_factory=list)  # acquired, to accept on the next fetch


@dataclass
class History:
    seq: int = 0
    confirmed: dict[int, int] = field(default_factory=dict)  # offset -> seq of the answer
    ambiguous: set[int] = field(default_factory=set)  # acceptance answer lost
    deliveries: list[tuple[int, int, int, str]] = field(default_factory=list)

    def tick(self) -> int:
        self.seq += 1
        return self.seq


def _join(cluster: Cluster, group: str, topic: str, member_id: str) -> None:
    def joined() -> bool:
        with WireClient(cluster.bootstrap.split(",")[0]) as w:
            found = w.call(FIND_COORDINATOR, 3, {"key": group, "key_type": 0})
        if found.error_code != NONE:
            return False
        address = f"{found.host}:{found.port}"
        with WireClient(address) as w:
            r = w.call(SHARE_HEARTBEAT, 1, {"group_id": group, "member_id": member_id,
                                            "member_epoch": 0, "rack_id": None,
                                            "subscribed_topic_names": [topic]})
        return bool(r.error_code == NONE)

    wait_until(joined, 20, f"member {member_id} joined {group}")


def _acquired(resp: Any) -> list[tuple[int, int]]:
    out = []
    for t in resp.responses:
        for p in t.partitions:
            values = {}
            for pos, h in iter_batches(p.records or b""):
                values.update({r.offset: r.value for r in decode_records(p.records, pos, h)})
            for a in p.acquired_records:
                for o in range(a.first_offset, a.last_offset + 1):
                    assert values[o] == f"v{o}".encode()
                    out.append((o, a.delivery_count))
    return out


def _round(cluster: Cluster, m: Member, group: str, tid: uuid.UUID, topic: str,
           history: History, max_records: int = 15) -> list[int]:
    """One ShareFetch of member `m` at the partition's current leader, accepting what it
    holds; returns the offsets it acquired."""
    leader = cluster.leaders(topic)[0]
    if leader < 0:
        return []
    if leader != m.leader or m.conn is None:
        if m.conn is not None:
            m.conn.close()
        m.conn, m.leader, m.epoch = WireClient(cluster.broker(leader).bootstrap), leader, 0
        m.pending = []  # held at the old leader: released there, never acknowledged here
    acks = [{"first_offset": o, "last_offset": o, "acknowledge_types": [ACCEPT]}
            for o in m.pending] if m.epoch else []
    body = {"group_id": group, "member_id": m.member_id, "share_session_epoch": m.epoch,
            "max_wait": 500, "min_bytes": 1, "max_bytes": 1 << 20,
            "max_records": max_records, "batch_size": max_records, "forgotten_topics_data": [],
            "topics": [{"topic_id": tid, "partitions": [
                {"partition_index": 0, "acknowledgement_batches": acks}]}]}
    sent = list(m.pending) if acks else []
    try:
        resp = m.conn.call(SHARE_FETCH, 1, body)
    except OSError:  # the leader died with the request: its acknowledgements may have held
        history.ambiguous.update(sent)
        m.conn.close()
        m.conn, m.pending = None, []
        return []
    seq = history.tick()
    if resp.error_code != NONE:  # nothing was applied; a new session (or member) next time
        if resp.error_code == UNKNOWN_MEMBER_ID:
            _join(cluster, group, topic, m.member_id)
        m.conn.close()
        m.conn, m.pending = None, []
        return []
    m.epoch += 1
    part = resp.responses[0].partitions[0] if resp.responses else None
    if sent:
        code = part.acknowledge_error_code if part is not None else NONE
        if code == NONE:
            for o in sent:
                history.confirmed.setdefault(o, seq)
        elif code != INVALID_RECORD_STATE:  # the state write failed: it may still have held
            history.ambiguous.update(sent)
        # INVALID_RECORD_STATE: not the holder any more, the record stays to be delivered
    if part is not None and part.error_code != NONE:
        m.conn.close()
        m.conn, m.pending = None, []
        return []
    got = _acquired(resp)
    for o, count in got:
        history.deliveries.append((seq, o, count, m.member_id))
    m.pending = [o for o, _ in got]
    return m.pending


@pytest.mark.parametrize("kill", ["leader", "share-coordinator"])
def test_kill9_of_leader_or_share_coordinator_loses_and_repeats_no_acknowledgement(
        zookeeper, tmp_path, request, kill):
    """`leader`: the share-partition leader dies. `share-coordinator`: the leader of the
    share-partition's `__share_group_state` partition dies: the next coordinator loads the
    state from its replica and the leader's persister finds it there."""
    cluster = Cluster(zookeeper, tmp_path, **SETTINGS).start()
    try:
        _run(cluster, kill)
    except BaseException:
        for b in cluster.brokers:
            request.node.add_report_section("call", f"{b.name} log", b.log_tail(80))
        raise
    finally:
        cluster.close()


def test_java_share_consumers_survive_a_kill9_of_the_leader(zookeeper, tmp_path, request):
    """The same with Kafka's Java KafkaShareConsumer (4.3): three consumers accept every
    record with commitSync, whose per-partition results tell which acknowledgements the leader
    confirmed; the leader, also the group's coordinator, is killed mid-stream."""
    cluster = Cluster(zookeeper, tmp_path, **SETTINGS).start()
    app = None
    try:
        topic, group, _ = _setup(cluster, JAVA_RECORDS)
        # The group's coordinator dies with the leader: the consumers heartbeat on to the next
        # one, which replays the group from `__consumer_offsets` (GROUP_ID_NOT_FOUND would be
        # fatal to them).
        victim = cluster.leaders(topic)[0]
        while _coordinator(cluster, GROUP_KEY, group) != victim:
            group = f"sg-{uuid.uuid4().hex[:6]}"
            _configure_group(cluster, group)
        classes = compile_java([JAVA_SRC / "ShareConsumers.java"], classpath="kafka4")
        app = JavaProcess("ShareConsumers", ["checked", cluster.bootstrap, topic, group, "3",
                                             str(JAVA_RECORDS)],
                          log_path=tmp_path / "consumers.log", extra_classpath=[classes]).start()
        wait_until(lambda: app.log_text().count("CONFIRMED ") >= JAVA_RECORDS // 3, 60,
                   "a third of the records accepted")
        assert cluster.leaders(topic)[0] == victim
        killed_at = len(app.log_text().splitlines())
        cluster.broker(victim).kill9()
        log.info("killed broker %d, leader of %s-0", victim, topic)
        wait_until(lambda: not app.is_running(), 100, "the consumers to finish")
        text = app.log_text()
        assert app.proc is not None and app.proc.returncode == 0, app.log_tail()
        _check_java(text.splitlines(), killed_at)
    except BaseException:
        for b in cluster.brokers:
            request.node.add_report_section("call", f"{b.name} log", b.log_tail(80))
        if app is not None:
            request.node.add_report_section("call", "consumers", app.log_tail(120))
        raise
    finally:
        if app is not None:
            app.kill9()
        cluster.close()


def _check_java(lines: list[str], killed_at: int) -> None:
    confirmed: dict[str, int] = {}
    failed: set[str] = set()
    repeated, deliveries_after = [], 0
    for i, line in enumerate(lines):
        kind, _, rest = line.partition(" ")
        if kind == "DELIVERED":
            value = rest.split()[0]
            deliveries_after += i > killed_at
            if value in confirmed:
                repeated.append(line)
        elif kind == "CONFIRMED":
            confirmed.setdefault(rest, i)
        elif kind == "FAILED":
            failed.add(rest)
    assert repeated == [], f"accepted records delivered again: {repeated[:10]}"
    missing = sorted({f"v{i}" for i in range(JAVA_RECORDS)} - set(confirmed) - failed)
    assert missing == [], f"records never accepted: {missing[:20]}"
    assert deliveries_after, "the consumers read on after the kill"
    log.info("%d confirmed, %d failed acknowledgements; %d deliveries after the kill",
             len(confirmed), len(failed), deliveries_after)


def _setup(cluster: Cluster, records: int) -> tuple[str, str, uuid.UUID]:
    """A topic of replication factor 3 holding `records` values v0.., a share group reading
    from the earliest offset (share.version 1: the new cluster's level, which every broker
    reports): (topic, group, topic id)."""
    from confluent_kafka import Producer

    topic, group = f"sq-{uuid.uuid4().hex[:6]}", f"sg-{uuid.uuid4().hex[:6]}"
    create_topic(cluster, topic, 1, 3, **{"min.insync.replicas": "2"})
    bootstrap = cluster.bootstrap.split(",")[0]
    with WireClient(bootstrap) as w:
        md = w.call(3, 12, {"topics": [{"name": topic, "topic_id": None}],
                            "allow_auto_topic_creation": False,
                            "include_topic_authorized_operations": False})
        tid = md.topics[0].topic_id
    _configure_group(cluster, group)
    wait_until(lambda: all(_supports_share(b.bootstrap) for b in cluster.brokers), 20,
               "share.version finalized on every broker")
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(records):
        producer.produce(topic, f"v{i}".encode(), partition=0)
    assert producer.flush(30) == 0
    return topic, group, tid


def _configure_group(cluster: Cluster, group: str) -> None:
    with WireClient(cluster.bootstrap.split(",")[0]) as w:
        r = w.call(44, 1, {"validate_only": False, "resources": [
            {"resource_type": 32, "resource_name": group, "configs": [
                {"name": "share.auto.offset.reset", "config_operation": 0,
                 "value": "earliest"}]}]})
        assert r.responses[0].error_code == NONE, r


def _coordinator(cluster: Cluster, key_type: int, key: str) -> int:
    """FindCoordinator's node for `key`, once it has one (its topic may be just created)."""
    found: list[int] = []
    wait_until(lambda: found.append(find_coordinators(cluster, key_type, [key])[key]) is None,
               20, f"a coordinator for {key}")
    return found[-1]


def _share_coordinator(cluster: Cluster, group: str, tid: uuid.UUID) -> int:
    return _coordinator(cluster, SHARE_KEY, f"{group}:{kafka_uuid_string(tid)}:0")


def _run(cluster: Cluster, kill: str) -> None:
    topic, group, tid = _setup(cluster, RECORDS)
    # the share-partition's leader and its share coordinator on different brokers: the
    # persister's requests cross brokers, and each kill takes only one of the two
    leader = cluster.leaders(topic)[0]
    while _share_coordinator(cluster, group, tid) == leader:
        group = f"sg-{uuid.uuid4().hex[:6]}"
        _configure_group(cluster, group)
    members = [Member(uuid.uuid4().hex), Member(uuid.uuid4().hex)]
    for m in members:
        _join(cluster, group, topic, m.member_id)
    history = History()
    # read about a third, then stop with both members holding unacknowledged records
    while len(history.confirmed) < RECORDS // 3:
        for m in members:
            _round(cluster, m, group, tid, topic, history)
    in_flight: set[int] = set()
    for m in members:
        in_flight.update(_round(cluster, m, group, tid, topic, history))
    assert in_flight, "the members hold records when the leader dies"
    assert cluster.leaders(topic)[0] == leader
    coordinator = _share_coordinator(cluster, group, tid)
    assert coordinator != leader
    victim = leader if kill == "leader" else coordinator
    log.info("killing broker %d (leader of %s-0: %d, share coordinator: %d)", victim, topic,
             leader, coordinator)
    killed_at = history.tick()
    cluster.broker(victim).kill9()
    wait_until(lambda: cluster.leaders(topic)[0] not in (victim, -1), 30, "a leader")

    deadline = time.monotonic() + 40
    quiet = 0
    while time.monotonic() < deadline:
        got = []
        for m in members:
            got += _round(cluster, m, group, tid, topic, history)
        done = set(history.confirmed) | history.ambiguous
        pending = any(m.pending for m in members)
        quiet = quiet + 1 if not got and not pending and len(done) == RECORDS else 0
        if quiet >= 3:
            break
    for m in members:
        if m.conn is not None:
            m.conn.close()

    # no confirmed acceptance is delivered again
    repeated = [(seq, o, count) for seq, o, count, _ in history.deliveries
                if o in history.confirmed and seq > history.confirmed[o]]
    assert repeated == [], f"accepted records delivered again: {repeated[:10]}"
    # nothing is lost: every record accepted (an acceptance whose answer was lost counts)
    missing = sorted(set(range(RECORDS)) - set(history.confirmed) - history.ambiguous)
    assert missing == [], f"records never accepted: {missing[:20]} ..."
    # what was in flight at the kill is delivered again after it (when the leader died), or
    # accepted by its holder (when it survived)
    again = {o for seq, o, _, _ in history.deliveries if seq > killed_at}
    settled = {o for o, seq in history.confirmed.items() if seq > killed_at}
    if victim == leader:
        assert in_flight <= again | history.ambiguous, sorted(in_flight - again)
    else:
        assert in_flight <= again | settled | history.ambiguous, sorted(in_flight - again)
    log.info("%d deliveries of %d records, %d after the kill; %d ambiguous acceptances",
             len(history.deliveries), RECORDS, len(again), len(history.ambiguous))


def _supports_share(address: str) -> bool:
    with WireClient(address) as w:
        r = w.call(18, 3, {"client_software_name": "t", "client_software_version": "1"})
    return any(f.name == "share.version" and f.max_version_level >= 1
               for f in r.finalized_features)
