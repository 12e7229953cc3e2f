"""The metadata store the broker processes of one host share without ZooKeeper (SQLite in WAL
mode): two stores on one file, in this process and in another, see each other's registrations
and writes; a store that stops renewing its lease loses its registration as a ZooKeeper session
expires; a transaction that fails writes nothing."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from kazoo.exceptions import BadVersionError, NodeExistsError, RolledBackError

from samsa.broker.cluster.metadata_store import BrokerInfo, PartitionState, TopicState
from samsa.broker.cluster.shared.store import SharedMetadataStore
from samsa.broker.cluster.shared.znodes import SqliteZk
from samsa.broker.context import KafkaPrincipal
from samsa.broker.security.authorizer import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    PermissionType,
    ResourcePattern,
)
from samsa.broker.security.scram import ScramCredential
from samsa.broker.security.tokens import TokenInformation


async def _until(predicate: Callable[[], object], timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached"
        await asyncio.sleep(0.02)


def _store(path: Path, broker_id: int, timeout_ms: int = 4000) -> SharedMetadataStore:
    return SharedMetadataStore(path, BrokerInfo(broker_id, "127.0.0.1", 9000 + broker_id),
                               timeout_ms)


@pytest.fixture
async def pair(tmp_path: Path) -> AsyncIterator[tuple[SharedMetadataStore, SharedMetadataStore]]:
    a, b = _store(tmp_path / "m.db", 1), _store(tmp_path / "m.db", 2)
    await a.start()
    await b.start()
    try:
        yield a, b
    finally:
        await b.close()
        await a.close()


def _topic(name: str) -> TopicState:
    return TopicState(name, uuid.uuid4(),
                      {0: PartitionState([1], 1, 0, [1]), 1: PartitionState([2], 2, 0, [2])},
                      {"retention.ms": "1000"})


async def test_processes_share_one_cluster_and_see_each_other(pair, tmp_path):
    a, b = pair
    assert a.cluster_id and a.cluster_id == b.cluster_id
    await _until(lambda: [x.broker_id for x in a.brokers()] == [1, 2])
    await _until(lambda: [x.broker_id for x in b.brokers()] == [1, 2])
    assert a.registry.broker_epoch != b.registry.broker_epoch
    await b.close()
    # a clean close ends the session: its registration goes at once, no lease to wait for
    await _until(lambda: [x.broker_id for x in a.brokers()] == [1], timeout=2.0)


async def test_a_new_cluster_has_its_features_from_its_first_moment(tmp_path):
    """As with ZooKeeper (tests/cluster/test_features_zk.py): the cluster id and the default
    feature levels are written in one transaction, so that a process starting beside the
    first never finds the one without the other."""
    a = _store(tmp_path / "m.db", 1)
    await a.start()
    try:
        zk = a.session.zk
        assert zk.exists("/cluster/id").czxid == zk.exists("/feature").czxid
        assert a.finalized_features().levels["share.version"] == 1
    finally:
        await a.close()


async def test_topic_and_partition_state_changes_reach_the_other(pair):
    a, b = pair
    seen: list[tuple[str, str]] = []
    b.add_listener(lambda kind, name: seen.append((kind, name)))
    await a.create_topic(_topic("orders"))
    await _until(lambda: b.topic("orders") is not None)
    topic = b.topic("orders")
    assert topic is not None and topic.configs == {"retention.ms": "1000"}
    assert b.topic_name_by_id(topic.topic_id) == "orders"
    assert ("topic", "orders") in seen
    # a leader's ISR write, conditional on the state's version, as the ZooKeeper store's
    doc, version = await a.states.read_partition_state("orders", 0)
    assert await a.states.write_leader_isr("orders", 0, {**doc, "isr": [1, 2]}, version)
    assert await a.states.write_leader_isr("orders", 0, doc, version) is None  # stale version
    await _until(lambda: b.topic("orders").partitions[0].isr == [1, 2])
    await a.delete_topic("orders")
    await _until(lambda: b.topic("orders") is None)


async def test_one_controller_is_elected(pair):
    a, b = pair
    assert await a.controller.elect()
    assert not await b.controller.elect()
    await _until(lambda: b.controller_id() == 1)
    await a.controller.resign()
    await _until(lambda: b.controller_id() == -1)
    assert await b.controller.elect()
    assert b.controller.epoch == a.controller.epoch + 1


async def test_configs_quotas_users_acls_tokens_and_features_are_shared(pair):
    a, b = pair
    await a.write_broker_config("<default>", {"log.retention.ms": "5000"})
    await _until(lambda: b.broker_configs().get("<default>") == {"log.retention.ms": "5000"})
    credential = ScramCredential.from_config(
        "salt=c2FsdA==,stored_key=c3RvcmVk,server_key=c2VydmVy,iterations=4096")
    await a.alter_scram_credentials([("alice", "SCRAM-SHA-256", credential)])
    await _until(lambda: b.scram_credential("alice", "SCRAM-SHA-256") is not None)
    binding = AclBinding(ResourcePattern.named("Topic", "orders", "LITERAL"),
                         AccessControlEntry("User:alice", "*", AclOperation.READ,
                                            PermissionType.ALLOW))
    assert await a.create_acls([binding]) == [None]
    await _until(lambda: binding in set(b.acls().bindings()))
    features = await a.update_features(lambda levels: {**levels, "transaction.version": 1})
    await _until(lambda: b.finalized_features().epoch == features.epoch)
    assert b.finalized_features().level("transaction.version") == 1
    await a.set_group_configs("g", {"consumer.session.timeout.ms": "50000"})
    assert await b.group_configs("g") == {"consumer.session.timeout.ms": "50000"}
    await a.alter_client_quotas([((("user", "alice"),), {"producer_byte_rate": 1024.0})])
    await _until(lambda: b.client_quotas() == {(("user", "alice"),):
                                               {"producer_byte_rate": 1024.0}})
    alice = KafkaPrincipal("User", "alice")
    await a.delegation_tokens.put_token(TokenInformation("t1", alice, alice, (), 1, 3, 2))
    await _until(lambda: "t1" in b.delegation_tokens.tokens())


async def test_producer_id_blocks_never_overlap(pair):
    a, b = pair
    starts = await asyncio.gather(*(s.producer_ids.allocate(1000) for s in (a, b, a, b)))
    assert sorted(starts) == [0, 1000, 2000, 3000]


async def test_a_process_that_stops_renewing_loses_its_registration(tmp_path):
    """kill -9 of a process: nothing ends its session, its lease passes, and the others delete
    its ephemeral znodes (registration, controller seat) as ZooKeeper expires a session."""
    a, b = _store(tmp_path / "m.db", 1, 1000), _store(tmp_path / "m.db", 2, 1000)
    await a.start()
    await b.start()
    try:
        assert await b.controller.elect()
        await _until(lambda: a.controller_id() == 2)
        zk = b.session.zk
        assert isinstance(zk, SqliteZk)
        zk._stop.set()  # b's poller stops: no renewal, no session end
        await _until(lambda: [x.broker_id for x in a.brokers()] == [1], timeout=5.0)
        await _until(lambda: a.controller_id() == -1, timeout=2.0)
    finally:
        await a.close()


async def test_an_expired_session_is_reported_lost_and_replaced(tmp_path):
    """A process that was paused past its lease finds its session gone: LOST, a new session,
    and (as after a ZooKeeper session expiry) the broker registers again."""
    a, b = _store(tmp_path / "m.db", 1, 1000), _store(tmp_path / "m.db", 2, 1000)
    await a.start()
    await b.start()
    try:
        first = b.registry.broker_epoch
        zk = b.session.zk
        assert isinstance(zk, SqliteZk)
        with zk._lock:  # as another process would, once b's lease has passed
            zk._conn().execute("UPDATE sessions SET expires_ms = 0 WHERE id = ?",
                               (zk.client_id[0],))
        await _until(lambda: b.session.session_lost.is_set(), timeout=5.0)
        assert b.session.session_expired and not b.session.registered
        await _until(lambda: [x.broker_id for x in a.brokers()] == [1])
        await b.registry.reregister()
        assert b.registry.broker_epoch > first
        await _until(lambda: [x.broker_id for x in a.brokers()] == [1, 2])
    finally:
        await b.close()
        await a.close()


def test_a_failed_transaction_writes_nothing(tmp_path):
    zk = SqliteZk(tmp_path / "m.db", 4.0)
    zk.start()
    try:
        zk.create("/a", b"1")
        tx = zk.transaction()
        tx.create("/b", b"2")
        tx.check("/a", 5)  # /a is at version 0
        tx.set_data("/a", b"3")
        results = tx.commit()
        assert isinstance(results[0], RolledBackError)
        assert isinstance(results[1], BadVersionError)
        assert zk.exists("/b") is None and zk.get("/a")[0] == b"1"
        with pytest.raises(NodeExistsError):
            zk.create("/a")
        first = zk.create("/q/n_", sequence=True, makepath=True)
        second = zk.create("/q/n_", sequence=True)
        assert (first, second) == ("/q/n_0000000000", "/q/n_0000000001")
        zk.delete("/q", recursive=True)
        assert zk.get_children("/") == ["a"]
    finally:
        zk.stop()
        zk.close()


_OTHER_PROCESS = textwrap.dedent("""
    import asyncio, sys, uuid
    from pathlib import Path
    from samsa.broker.cluster.metadata_store import BrokerInfo, PartitionState, TopicState
    from samsa.broker.cluster.shared.store import SharedMetadataStore

    async def main():
        store = SharedMetadataStore(Path(sys.argv[1]), BrokerInfo(7, "127.0.0.1", 9007), 4000)
        await store.start()
        await store.create_topic(TopicState("from-7", uuid.uuid4(),
                                            {0: PartitionState([7], 7, 0, [7])}))
        while "from-1" not in store.topics():
            await asyncio.sleep(0.02)
        print(sorted(b.broker_id for b in store.brokers()), flush=True)
        await store.close()

    asyncio.run(main())
""")


async def test_two_processes_share_the_file(tmp_path):
    path = tmp_path / "m.db"
    a = _store(path, 1)
    await a.start()
    other = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _OTHER_PROCESS, str(path), stdout=subprocess.PIPE)
    try:
        await _until(lambda: a.topic("from-7") is not None, timeout=30.0)
        await _until(lambda: 7 in [x.broker_id for x in a.brokers()])
        await a.create_topic(_topic("from-1"))
        out, _ = await asyncio.wait_for(other.communicate(), 30.0)
        assert out.decode().strip() == "[1, 7]"
        assert other.returncode == 0
        await _until(lambda: [x.broker_id for x in a.brokers()] == [1])
    finally:
        if other.returncode is None:
            other.kill()
            await other.wait()
        await a.close()


async def test_a_restarted_process_takes_its_id_back_once_its_old_lease_passes(tmp_path):
    """kill -9 and a restart within the lease: the new life waits for the old session to
    expire (as with ZooKeeper), then registers with a new broker epoch."""
    old = _store(tmp_path / "m.db", 1, 1000)
    await old.start()
    first = old.registry.broker_epoch
    zk = old.session.zk
    assert isinstance(zk, SqliteZk)
    zk._stop.set()  # dies: no renewal, no session end
    new = _store(tmp_path / "m.db", 1, 1000)
    try:
        await new.start()  # registers once the old lease has passed
        assert new.registry.broker_epoch > first
        assert [b.broker_id for b in new.brokers()] == [1]
    finally:
        await new.close()


def test_watches_follow_kazoo_semantics(tmp_path):
    """A DataWatch is called at once (None for a missing znode) and after each change until
    it returns False; a ChildrenWatch of a missing znode ends; a process that missed pruned
    changes reads everything it watches again."""
    zk, other = SqliteZk(tmp_path / "m.db", 4.0), SqliteZk(tmp_path / "m.db", 4.0)
    zk.start()
    other.start()
    try:
        data: list[bytes | None] = []
        zk.DataWatch("/d", lambda d, _stat: data.append(d) or len(data) < 3)
        children: list[list[str]] = []
        zk.ChildrenWatch("/", lambda c: children.append(c))
        zk.ChildrenWatch("/missing", lambda c: children.append(["never"]))
        other.create("/d", b"1")
        _wait(lambda: data == [None, b"1"])
        other.set("/d", b"2")
        _wait(lambda: len(data) == 3)
        other.set("/d", b"3")  # the watch returned False at its third call
        other.create("/e")
        _wait(lambda: children[-1] == ["d", "e"])
        assert data == [None, b"1", b"2"] and ["never"] not in children
        with zk._lock:  # zk paused: the changes it had not read yet were pruned meanwhile
            db = zk._conn()
            zk._seen_zxid = 0
            db.execute("DELETE FROM changes")
            db.execute("UPDATE meta SET value = (SELECT value + 1 FROM meta WHERE key = 'zxid')"
                       " WHERE key = 'pruned'")
            db.execute("UPDATE znodes SET cversion = cversion + 1 WHERE path = '/'")
        _wait(lambda: len(children) == 4)  # read again, though no change row named it
        time.sleep(0.2)
        assert len(children) == 4 and zk._changed() == set()  # once: the gap is closed
    finally:
        for z in (zk, other):
            z.stop()
            z.close()


def _wait(predicate: Callable[[], object], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


_REGISTERED = textwrap.dedent("""
    import asyncio, sys
    from pathlib import Path
    from samsa.broker.cluster.metadata_store import BrokerInfo
    from samsa.broker.cluster.shared.store import SharedMetadataStore

    async def main():
        store = SharedMetadataStore(Path(sys.argv[1]), BrokerInfo(8, "127.0.0.1", 9008), 60000)
        await store.start()
        print("registered", flush=True)
        await asyncio.sleep(3600)

    asyncio.run(main())
""")


async def test_the_session_of_a_killed_process_ends_at_once(tmp_path):
    """Its pid no longer runs (same kernel, same pid namespace): its registration goes at the
    next poll of another process, long before its lease (60 s) would pass."""
    path = tmp_path / "m.db"
    a = _store(path, 1, 60000)
    await a.start()
    other = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _REGISTERED, str(path), stdout=subprocess.PIPE)
    try:
        assert other.stdout is not None
        assert await asyncio.wait_for(other.stdout.readline(), 30.0) == b"registered\n"
        await _until(lambda: 8 in [x.broker_id for x in a.brokers()])
        other.kill()
        await other.wait()
        await _until(lambda: [x.broker_id for x in a.brokers()] == [1], timeout=5.0)
    finally:
        if other.returncode is None:
            other.kill()
            await other.wait()
        await a.close()


async def test_the_session_of_a_killed_process_ends_before_its_parent_reaps_it(tmp_path):
    """A killed process not yet reaped still answers kill(pid, 0) (a zombie, as a node's
    broker is until its supervisor looks): its pidfd says it has exited."""
    path = tmp_path / "m.db"
    a = _store(path, 1, 60000)
    await a.start()
    other = subprocess.Popen([sys.executable, "-c", _REGISTERED, str(path)],
                             stdout=subprocess.PIPE)
    try:
        assert other.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(other.stdout.readline), 30.0)
        assert line == b"registered\n"
        await _until(lambda: 8 in [x.broker_id for x in a.brokers()])
        other.kill()  # not waited for: a zombie
        await _until(lambda: [x.broker_id for x in a.brokers()] == [1], timeout=5.0)
        assert Path(f"/proc/{other.pid}").exists()  # still the zombie
    finally:
        other.kill()
        other.wait()
        await a.close()


async def test_an_idle_process_sleeps_until_another_writes(tmp_path):
    """The poller wakes for another process's write (and exit), not on a 50 ms timer: idle,
    a few passes a second at most (before: twenty)."""
    a, b = _store(tmp_path / "m.db", 1, 60000), _store(tmp_path / "m.db", 2, 60000)
    await a.start()
    await b.start()
    try:
        zk = a.session.zk
        assert isinstance(zk, SqliteZk)
        await asyncio.sleep(0.5)  # the start's writes seen
        passes = zk.passes
        await asyncio.sleep(2.0)
        assert zk.passes - passes <= 3
        woken = zk.woken
        await b.create_topic(_topic("written"))
        await _until(lambda: a.topic("written") is not None)
        assert zk.woken > woken
        # seen at once, not at the poller's 1 s timer: SQLite makes a commit visible after
        # the -wal write that wakes the poller, which then looks again shortly (SETTLE_S)
        seen = []
        for i in range(3):
            t0 = time.monotonic()
            await b.create_topic(_topic(f"timed-{i}"))
            await _until(lambda i=i: a.topic(f"timed-{i}") is not None, timeout=5.0)
            seen.append(time.monotonic() - t0)
        assert min(seen) < 0.25, seen
    finally:
        await b.close()
        await a.close()
