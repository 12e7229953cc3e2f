"""Exactly-once across a transaction coordinator failover: a transaction ends all-committed or
all-aborted on every partition, whichever process dies at whichever moment.

The window: the coordinator C has written PrepareCommit (or PrepareAbort) to its own log, but
its follower F does not have it yet. If C sends markers in that window and then dies (or loses
its ZooKeeper session), F takes over seeing the transaction Ongoing and aborts it on timeout,
while a partition already holds C's COMMIT marker: half-committed. Kafka closes the window by
sending markers only once the prepare record is replicated to the ISR.

The scenario, on 4 brokers each in its own network namespace (tests/chaos/netns.py):
  __transaction_state (and __consumer_offsets): one partition, replicas [C, F];
  the data topic: p0 led by B with replicas [B, C], p1 led by D with replicas [D, B].
The transaction (a raw-protocol client, so the test decides exactly when EndTxn is sent)
writes p0 and p1 (and, in the offsets case, consumer offsets through C). Then every packet
C's listener sends is dropped (F's fetches and the client's answers are lost; C's own
connections, to B for markers and to ZooKeeper, still work), D is paused, EndTxn goes to C, and
C is killed (or cut from ZooKeeper until its session expires) along with D. F becomes the
coordinator, B leads p1. With min.isr 2, F can write nothing alone: C comes back (restarted,
or reconnected to ZooKeeper) and must rejoin as F's follower, dropping what F never had. A
killed C's sockets are destroyed before its drop is lifted: its kernel would still retransmit
what they held. The verdict is read once every partition of the transaction has a marker.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import NewTopic

from tests.chaos.nemesis import partitionable_cluster
from tests.chaos.netns import NetLab, unavailable_reason
from tests.cluster.cluster import GROUP_KEY, TRANSACTION_KEY, Cluster, wait_until
from tests.protocol.wire import WireClient
from tests.transactions.txnwire import ADD_OFFSETS, END_TXN, TxnWire, markers, txn_batch

# One worker at a time changes the host's network (tests/support/xdist_units.py).
pytestmark = [pytest.mark.timeout(240), pytest.mark.xdist_group("host-network")]
log = logging.getLogger(__name__)

TXN_TOPIC, OFFSETS_TOPIC = "__transaction_state", "__consumer_offsets"
FIND_COORDINATOR, TXN_OFFSET_COMMIT, OFFSET_FETCH = 10, 28, 9
# Answers after which a client asks again (coordinator moving, loading, or busy).
RETRIABLE = {6, 7, 14, 15, 16, 51, 88}
REQUEST_TIMEOUT_S = 15.0  # how long the surviving client waits for an answer to a request
# Long enough that C never aborts the transaction itself before EndTxn reaches it; F aborts
# it that long after it started.
TXN_TIMEOUT_MS = 8000
# How long the test lets C send markers after EndTxn when none appear (with the prepare
# record replicated first, none ever will: F cannot fetch it). A coordinator that also leads
# one of the transaction's partitions (the group's offsets) may wait for its own marker there
# to replicate, up to its 10 s marker timeout, before it sends the others (Samsa did).
MARKER_GRACE_S = 3.0
MARKER_GRACE_LOCAL_FIRST_S = 12.0
GROUP_OFFSET = 42  # the consumed position the transaction commits for its group

SETTINGS: dict[str, object] = {
    "transaction.state.log.num.partitions": 1,
    "transaction.state.log.replication.factor": 2,
    "transaction.state.log.min.isr": 2,
    "offsets.topic.num.partitions": 1,
    "offsets.topic.replication.factor": 2,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 200,
    # F must still be in C's ISR when C goes: elected as the new leader, not left out.
    "replica.lag.time.max.ms": 15000,
}


@pytest.fixture
def lab_cluster(tmp_path: Path) -> Iterator[tuple[Cluster, NetLab]]:
    reason = unavailable_reason()
    if reason is None and shutil.which("ss") is None:
        reason = "no `ss` binary (iproute2) on PATH"
    if reason:
        pytest.skip(f"the window is opened by dropping one broker's packets: {reason}")
    with partitionable_cluster(tmp_path, size=4, **SETTINGS) as (cluster, lab):
        yield cluster, lab
    assert not lab.leaked_pids, f"processes left in the namespaces: {lab.leaked_pids}"


@dataclass
class Roles:
    coordinator: int  # C: leads __transaction_state-0 (and __consumer_offsets-0)
    follower: int  # F: its only follower, the next coordinator
    b: int  # leads p0 (follower C) and follows p1
    d: int  # leads p1

    def describe(self) -> str:
        return f"C={self.coordinator} F={self.follower} B={self.b} D={self.d}"


@dataclass
class Scenario:
    cluster: Cluster
    lab: NetLab
    commit: bool  # EndTxn(commit) or EndTxn(abort)
    fault: str  # "kill": C, D and the client are killed; "zookeeper": C loses its session
    offsets: bool = False  # the transaction also commits offsets of a group coordinated by C
    suffix: str = field(default_factory=lambda: uuid.uuid4().hex[:6])
    notes: list[str] = field(default_factory=list)
    paused: int | None = None
    zombie: int | None = None  # a C cut from ZooKeeper, still running

    def __post_init__(self) -> None:
        self.topic, self.group = f"eos-{self.suffix}", f"g-{self.suffix}"
        self.txn_id = f"t-{self.suffix}"
        self.values = [f"p{p}-{self.suffix}".encode() for p in range(2)]

    def addr(self, broker_id: int) -> str:
        return self.cluster.broker(broker_id).bootstrap

    # ------------------------------------------------------------------ set-up
    def place(self) -> Roles:
        """The roles, the controller kept away from C and D (they die), and every topic
        created with its replicas where the window needs them."""
        with WireClient(self.addr(0)) as w:
            controller = w.call(3, 1, {"topics": []}).controller_id
        others = [b.broker_id for b in self.cluster.brokers if b.broker_id != controller]
        roles = Roles(coordinator=others[0], follower=others[1], b=controller, d=others[2])
        c, f = roles.coordinator, roles.follower
        internal = {"cleanup.policy": "compact", "min.insync.replicas": "2"}
        admin = self.cluster.admin()  # must outlive its futures
        # (confluent-kafka wants the partition count too; it sends -1 with the assignment)
        fs = admin.create_topics([
            NewTopic(TXN_TOPIC, 1, replica_assignment=[[c, f]], config=internal),
            NewTopic(OFFSETS_TOPIC, 1, replica_assignment=[[c, f]], config=internal),
            NewTopic(self.topic, 2, replica_assignment=[[roles.b, c], [roles.d, roles.b]]),
        ], operation_timeout=20)
        for fut in fs.values():
            fut.result(timeout=30)
        expected = {(TXN_TOPIC, 0): c, (OFFSETS_TOPIC, 0): c, (self.topic, 0): roles.b,
                    (self.topic, 1): roles.d}
        # Seen by every broker, not just the controller: C answers AddPartitionsToTxn from its
        # own metadata cache, which a ZooKeeper watch fills a moment later (Kafka's too).
        wait_until(lambda: all(leader_of(self.addr(b.broker_id), t, p) == want
                               for b in self.cluster.brokers
                               for (t, p), want in expected.items()), 30, "leaders in place")
        return roles

    def begin(self, roles: Roles) -> tuple[TxnWire, int, int]:
        """A transaction on p0 and p1 (and the group's offsets), everything of it acknowledged
        and replicated to F. Returns the client connected to C, the producer id and epoch."""
        c = roles.coordinator
        wait_until(lambda: coordinator_of(self.addr(roles.b), TRANSACTION_KEY,
                                          self.txn_id) == c,
                   30, "C coordinating the transactional id")
        client = TxnWire(self.addr(c))
        init = retry(lambda: client.init_pid(self.txn_id, TXN_TIMEOUT_MS), "InitProducerId")
        pid, epoch = init.producer_id, init.producer_epoch
        parts = [(self.topic, 0), (self.topic, 1)]
        codes = client.add_partitions(self.txn_id, pid, epoch, parts)
        assert set(codes.values()) == {0}, f"AddPartitionsToTxn answered {codes}"
        for p, leader in ((0, roles.b), (1, roles.d)):
            with TxnWire(self.addr(leader)) as w:
                code, _ = w.produce(self.topic, p, txn_batch(pid, epoch, 0, [self.values[p]]),
                                    self.txn_id)
            assert code == 0, f"produce to p{p} answered {code}"
        if self.offsets:
            assert coordinator_of(self.addr(roles.b), GROUP_KEY, self.group) == c
            r = client.call(ADD_OFFSETS, 3, {"transactional_id": self.txn_id, "producer_id": pid,
                                             "producer_epoch": epoch, "group_id": self.group})
            assert r.error_code == 0, f"AddOffsetsToTxn answered {r.error_code}"
            r = client.call(TXN_OFFSET_COMMIT, 3, {
                "transactional_id": self.txn_id, "group_id": self.group, "producer_id": pid,
                "producer_epoch": epoch, "generation_id": -1, "member_id": "",
                "group_instance_id": None, "topics": [{"name": self.topic, "partitions": [{
                    "partition_index": 0, "committed_offset": GROUP_OFFSET,
                    "committed_leader_epoch": -1, "committed_metadata": ""}]}]})
            code = r.topics[0].partitions[0].error_code
            assert code == 0, f"TxnOffsetCommit answered {code}"
        # F has all C has so far: only what EndTxn writes will be missing on F.
        for topic in (TXN_TOPIC, OFFSETS_TOPIC):
            wait_until(lambda t=topic: same_size_on(self.cluster.log_sizes(t, 0),
                                                    (c, roles.follower)),
                       30, f"F holding all of C's {topic}-0")
        return client, pid, epoch

    # ------------------------------------------------------------------ the window
    def end_in_the_window(self, roles: Roles, client: TxnWire, pid: int, epoch: int) -> int:
        """EndTxn to a C that nobody hears, with D paused; then C (and D) go. Returns the
        EndTxn's correlation id."""
        self.lab.drop_listener_replies(roles.coordinator)
        self.pause(roles.d)
        correlation, request = client.encode_request(END_TXN, 3, {
            "transactional_id": self.txn_id, "producer_id": pid, "producer_epoch": epoch,
            "committed": self.commit})
        client.send_raw(request)  # its answer is dropped
        sent = time.monotonic()
        grace = MARKER_GRACE_LOCAL_FIRST_S if self.offsets else MARKER_GRACE_S
        early = poll(lambda: marker_of(self.addr(roles.b), self.topic, 0, pid) is not None,
                     grace)
        self.notes.append(f"p0's marker {'written' if early else 'not written'} "
                          f"{time.monotonic() - sent:.1f} s after EndTxn, C still coordinating")
        if self.fault == "kill":
            self.cluster.broker(roles.coordinator).kill9()
            client.close()  # the producing application dies: nobody retries its EndTxn
        else:
            self.lab.cut_zookeeper(roles.coordinator)
            self.zombie = roles.coordinator
        self.cluster.broker(roles.d).kill9()
        self.paused = None
        wait_until(lambda: (leader_of(self.addr(roles.b), TXN_TOPIC, 0) == roles.follower
                            and leader_of(self.addr(roles.b), self.topic, 1) == roles.b), 60,
                   "F coordinating and B leading p1")
        return correlation

    def bring_back_coordinator(self, roles: Roles) -> None:
        """C returns as F's follower: restarted once its old sockets are gone, or reconnected
        to ZooKeeper (where it finds its session expired). A C that was not killed stays deaf
        to clients: the surviving client hears nothing and retries after its request
        timeout, as a Kafka client does."""
        c = roles.coordinator
        if self.fault == "kill":
            wait_until(lambda: self.lab.destroy_listener_sockets(c) == 0, 30,
                       "the killed C's sockets gone")
            self.lab.heal()
            self.cluster.broker(c).start()
        else:
            self.lab.heal_addresses(c)
            self.zombie = None

    def client_answers(self, client: TxnWire, correlation: int, pid: int,
                       epoch: int) -> list[int]:
        """What the surviving client hears: the answer to its EndTxn, if C sends one within
        a request timeout, then, while answers are retriable, the answers of the current
        coordinator to the same EndTxn (as a Kafka client retries)."""
        answers: list[int] = []
        client.sock.settimeout(REQUEST_TIMEOUT_S)
        with contextlib.suppress(OSError, ConnectionError):
            answers.append(int(client.read_response(END_TXN, 3, correlation).error_code))
        client.close()
        deadline = time.monotonic() + 60
        while not answers or answers[-1] in RETRIABLE:
            assert time.monotonic() < deadline, f"EndTxn still answered {answers[-1:]} after 60 s"
            with contextlib.suppress(OSError, ConnectionError):
                coordinator = coordinator_of(self.addr(self.live_broker()), TRANSACTION_KEY,
                                             self.txn_id)
                with TxnWire(self.addr(coordinator)) as w:
                    answers.append(w.end_txn(self.txn_id, pid, epoch, self.commit))
            time.sleep(0.2)
        return answers

    def pause(self, broker_id: int) -> None:
        pid = self.cluster.broker(broker_id).pid
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)
        self.paused = broker_id

    def release(self) -> None:
        """Resume a paused broker, kill a zombie coordinator (a clean stop would wait for the
        ZooKeeper it cannot reach)."""
        if self.paused is not None:
            pid = self.cluster.broker(self.paused).pid
            if pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)
            self.paused = None
        if self.zombie is not None:
            self.cluster.broker(self.zombie).kill9()
            self.zombie = None

    # ------------------------------------------------------------------ the verdict
    def outcome(self, roles: Roles, pid: int) -> dict[str, bool]:
        """Once F settled the transaction: {where: committed?} from the first marker of the
        producer on each partition it wrote (read_uncommitted)."""
        where = {"p0": (roles.b, self.topic, 0), "p1": (roles.b, self.topic, 1)}
        if self.offsets:
            where["offsets"] = (roles.follower, OFFSETS_TOPIC, 0)
        found: dict[str, bool] = {}

        def settled() -> bool:
            for name, (broker_id, topic, p) in where.items():
                kind = marker_of(self.addr(broker_id), topic, p, pid)
                if kind is not None:
                    found[name] = kind
            return len(found) == len(where)

        wait_until(settled, 60, f"markers on {sorted(where)} (found {found})")
        return found

    def read_committed(self, roles: Roles) -> dict[str, bool]:
        """{p0/p1: is the transaction's record visible} to a read_committed consumer."""
        bootstrap = ",".join(self.addr(b) for b in (roles.b, roles.follower))
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"v-{self.suffix}",
                             "isolation.level": "read_committed", "enable.auto.commit": False,
                             "fetch.wait.max.ms": 100})
        seen: list[bytes] = []
        try:
            tps = [TopicPartition(self.topic, p, 0) for p in range(2)]
            consumer.assign(tps)
            ends = {p: consumer.get_watermark_offsets(TopicPartition(self.topic, p), 10)[1]
                    for p in range(2)}

            def at_end() -> bool:
                seen.extend(m.value() for m in consumer.consume(10, 0.3) if m.error() is None)
                return all(tp.offset >= ends[tp.partition]
                           for tp in consumer.position(consumer.assignment()))

            wait_until(at_end, 30, f"read_committed reaching the ends {ends}")
        finally:
            consumer.close()
        return {f"p{p}": self.values[p] in seen for p in range(2)}

    def committed_offset(self) -> int:
        """The group's committed offset of p0, asked of its current coordinator."""
        def fetch() -> Any:
            coordinator = coordinator_of(self.addr(self.live_broker()), GROUP_KEY, self.group)
            with WireClient(self.addr(coordinator)) as w:
                return w.call(OFFSET_FETCH, 7, {"group_id": self.group, "require_stable": True,
                                                "topics": [{"name": self.topic,
                                                            "partition_indexes": [0]}]})
        r = retry(fetch, "OffsetFetch", code=lambda r: r.error_code
                  or r.topics[0].partitions[0].error_code)
        return int(r.topics[0].partitions[0].committed_offset)

    def live_broker(self) -> int:
        return next(b.broker_id for b in self.cluster.brokers
                    if b.is_running() and not any(c.broker == b.broker_id
                                                  for c in self.lab.cuts))


# ---------------------------------------------------------------------------- helpers
def leader_of(bootstrap: str, topic: str, partition: int) -> int:
    with WireClient(bootstrap) as w:
        md = w.call(3, 1, {"topics": [{"name": topic}]})
    for t in md.topics:
        for p in t.partitions if t.name == topic else ():
            if p.partition_index == partition:
                return int(p.leader_id)
    return -1


def isr_of(bootstrap: str, topic: str, partition: int) -> list[int]:
    with WireClient(bootstrap) as w:
        md = w.call(3, 1, {"topics": [{"name": topic}]})
    return next(sorted(p.isr_nodes) for t in md.topics if t.name == topic
                for p in t.partitions if p.partition_index == partition)


def coordinator_of(bootstrap: str, key_type: int, key: str) -> int:
    with WireClient(bootstrap) as w:
        r = w.call(FIND_COORDINATOR, 3, {"key": key, "key_type": key_type})
    if r.error_code:
        raise ConnectionError(f"FindCoordinator({key}) answered {r.error_code}")
    return int(r.node_id)


def same_size_on(sizes: dict[int, int], brokers: tuple[int, int]) -> bool:
    return all(b in sizes for b in brokers) and len({sizes[b] for b in brokers}) == 1


def marker_of(bootstrap: str, topic: str, partition: int, pid: int) -> bool | None:
    """The first marker of producer `pid` in the partition (read_uncommitted, up to the HW):
    True for COMMIT, False for ABORT, None if there is none yet."""
    with TxnWire(bootstrap) as w:
        fetched = w.fetch(topic, partition, 0, 0)
    return next((commit for p, _, commit in markers(fetched.records) if p == pid), None)


def retry(call: Callable[[], Any], what: str, *, timeout: float = 30,
          code: Callable[[Any], int] = lambda r: r.error_code) -> Any:
    """`call()` until it answers something else than a retriable error."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            r = call()
            if code(r) == 0:
                return r
            if code(r) not in RETRIABLE:
                raise AssertionError(f"{what} answered {code(r)}")
            last: object = code(r)
        except (OSError, ConnectionError) as exc:
            last = exc
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} still failing after {timeout} s: {last}")
        time.sleep(0.2)


def poll(cond: Callable[[], bool], seconds: float) -> bool:
    """Whether `cond` became true within `seconds` (it may never: that is an answer too)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


@contextlib.contextmanager
def supervised(s: Scenario) -> Iterator[None]:
    """Every failure carries the scenario's notes and every broker's log tail."""
    try:
        yield
    except Exception as exc:
        what = str(exc).split("\nassert ")[0] if isinstance(exc, AssertionError) else repr(exc)
        raise AssertionError(f"{what}\nnotes: {s.notes}\n{s.cluster.logs_tail()}") from exc
    finally:
        s.release()


def run_window(cluster: Cluster, lab: NetLab, *, commit: bool, fault: str,
               offsets: bool = False) -> None:
    s = Scenario(cluster, lab, commit=commit, fault=fault, offsets=offsets)
    with supervised(s):
        roles = s.place()
        s.notes.append(roles.describe())
        client, pid, epoch = s.begin(roles)
        correlation = s.end_in_the_window(roles, client, pid, epoch)
        s.bring_back_coordinator(roles)
        answers = []
        if fault == "zookeeper":
            answers = s.client_answers(client, correlation, pid, epoch)
            s.notes.append(f"the surviving client's EndTxn answers: {answers}")
        outcome = s.outcome(roles, pid)
        s.notes.append(f"markers: {outcome}")
        assert len(set(outcome.values())) == 1, (
            f"half-{'committed' if commit else 'aborted'} transaction: first markers {outcome} "
            "(True = COMMIT)")
        committed = next(iter(outcome.values()))  # either outcome is fine, a mix never
        visible = s.read_committed(roles)
        assert visible == {"p0": committed, "p1": committed}, (
            f"read_committed sees {visible}, markers say committed={committed}")
        if offsets:
            got = s.committed_offset()
            want = GROUP_OFFSET if committed else -1
            assert got == want, (f"the group's committed offset is {got}, the transaction "
                                 f"{'committed' if committed else 'aborted'}")
        if answers:  # EndTxn(commit) succeeded exactly when the transaction committed
            assert (answers[-1] == 0) == committed and (0 not in answers or committed), (
                f"EndTxn(commit) answered {answers}, the transaction's markers {outcome}")
        # The cluster heals: D comes back and rejoins p1's ISR.
        cluster.broker(roles.d).start()
        wait_until(lambda: roles.d in isr_of(s.addr(roles.b), s.topic, 1), 60,
                   "D back in p1's ISR")
    log.info("%s", "; ".join(s.notes))


# ---------------------------------------------------------------------------- the tests
def test_prepare_commit_window_coordinator_killed(lab_cluster):
    run_window(*lab_cluster, commit=True, fault="kill")


def test_prepare_abort_window_coordinator_killed(lab_cluster):
    run_window(*lab_cluster, commit=False, fault="kill")


def test_prepare_commit_window_coordinator_loses_zookeeper_session(lab_cluster):
    run_window(*lab_cluster, commit=True, fault="zookeeper")


def test_prepare_commit_window_with_group_offsets(lab_cluster):
    run_window(*lab_cluster, commit=True, fault="kill", offsets=True)
