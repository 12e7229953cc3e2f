"""Kafka Streams 4.4 with `group.protocol=streams` (KIP-1071) against one Samsa broker.

tests/java/src/StreamsCount.java (re-key, repartition, count in a changelog-backed store,
exactly_once_v2) runs as a streams group: its heartbeats carry the topology, the broker creates
the repartition and changelog topics, assigns the tasks; a second instance joins and the tasks
move to it only once the first revoked them.
An instance killed -9 is removed once its session ends and the other takes its tasks; one
that closes leaves the group at once. The read_committed output of every key must be exactly
1, 2, ..., EVENTS throughout.

The broker runs with its defaults for the streams groups' APIs (served, streams.version
finalized at 1 by a new cluster), as Kafka 4.4.
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.java import run_java_tool
from tests.support.streams_app import (
    KEYS,
    CountReader,
    compile_streams_app,
    describe_bad,
    feed,
    streams_app,
)

pytestmark = pytest.mark.timeout(420)

EVENTS = 60  # per key
IN_PARTITIONS, OUT_PARTITIONS = 4, 2
STREAMS_BROKER = {"group.streams.session.timeout.ms": "10000",
                  "group.streams.heartbeat.interval.ms": "1000",
                  # each instance keeps a standby copy of the other's count store
                  "group.streams.num.standby.replicas": "1"}


def _create_topics(bootstrap: str, *topics: tuple[str, int]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(t, n, 1) for t, n in topics]).values():
        f.result(timeout=20)


def _streams_groups_tool(bootstrap: str, *args: str) -> str:
    """kafka-streams-groups.sh (Kafka's StreamsGroupCommand): ListGroups of type streams,
    StreamsGroupDescribe."""
    res = run_java_tool("org.apache.kafka.tools.streams.StreamsGroupCommand",
                        ["--bootstrap-server", bootstrap, *args])
    assert res.returncode == 0, res
    return res.stdout


def test_streams_group_protocol_two_instances(broker_factory, tmp_path):
    broker = broker_factory(settings=STREAMS_BROKER)
    suffix = uuid.uuid4().hex[:6]
    app_id, src, dst = f"sg-{suffix}", f"events-{suffix}", f"counts-{suffix}"
    _create_topics(broker.bootstrap, (src, IN_PARTITIONS), (dst, OUT_PARTITIONS))
    classes = compile_streams_app("kafka44")
    configs = {"group.protocol": "streams"}

    def app(name: str):
        return streams_app(classes, broker.bootstrap, app_id, src, dst, tmp_path / name,
                           threads=1, name=name, classpath="kafka44", configs=configs)

    a, b = app("a"), app("b")
    reader = CountReader(broker.bootstrap, dst, OUT_PARTITIONS)
    step = EVENTS // 4
    try:
        feed(broker.bootstrap, src, range(step))
        a.start()
        reader.wait_complete(step, 120, lambda: _dead(a))
        assert "kafka-streams 4.4.0" in a.log_text(), a.log_tail()

        b.start()  # the tasks are shared out: a revokes half, b is given them
        feed(broker.bootstrap, src, range(step, 2 * step), pause=0.02)
        reader.wait_complete(2 * step, 120, lambda: _dead(a) or _dead(b))
        assert _running_with_tasks(b), b.log_tail()
        assert app_id in _streams_groups_tool(broker.bootstrap, "--list").split()
        members = _streams_groups_tool(broker.bootstrap, "--describe", "--group", app_id,
                                       "--members")
        rows = [line.split() for line in members.splitlines() if line.split()[:1] == [app_id]]
        assert len(rows) == 2 and all("ACTIVE:" in row for row in rows), members
        assert any("STANDBY:" in row for row in rows), members
        state = _streams_groups_tool(broker.bootstrap, "--describe", "--group", app_id,
                                     "--state")
        row = next((r for r in map(str.split, state.splitlines()) if r[:1] == [app_id]), [])
        assert row[-2:] == ["Stable", "2"], state  # its state and member count
        offsets = _streams_groups_tool(broker.bootstrap, "--describe", "--group", app_id)
        listed = {(row[1], row[2]) for row in map(str.split, offsets.splitlines())
                  if row[:1] == [app_id]}
        assert {(src, str(p)) for p in range(IN_PARTITIONS)} <= listed, offsets

        # a is killed: once its session ends (10 s) b takes every task, and a's open
        # transaction is aborted once it times out
        a.kill9()
        feed(broker.bootstrap, src, range(2 * step, 3 * step))
        reader.wait_complete(3 * step, 120, lambda: _dead(b))

        before = len(a.log_text())
        a.start()  # a comes back, then leaves cleanly: b takes every task again
        assert _running_with_tasks(a, since=before), a.log_tail()
        assert a.stop() is not None, a.log_tail()
        feed(broker.bootstrap, src, range(3 * step, EVENTS))
        reader.wait_complete(EVENTS, 120, lambda: _dead(b))
        bad = reader.bad_sequences(EVENTS)
        assert not bad, f"{describe_bad(bad, EVENTS)}\n{a.log_tail()}\n{b.log_tail()}"
        assert not reader.errors, reader.errors
        print(f"{KEYS * EVENTS} records counted exactly once by a streams group")
    except AssertionError as exc:
        pytest.fail(f"{exc}\n{a.log_tail()}\n{b.log_tail()}", pytrace=False)
    finally:
        reader.close()
        for p in (a, b):
            p.stop()
    for p in (a, b):
        assert "UNCAUGHT" not in p.log_text(), p.log_tail()
        assert "STATE REBALANCING->RUNNING" in p.log_text(), p.log_tail()


def _dead(app) -> str | None:
    return None if app.is_running() else f"{app.name} exited ({app.proc.returncode})"


def _running_with_tasks(app, timeout: float = 60, since: int = 0) -> bool:
    """The application reached RUNNING (in its log after offset `since`)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if "STATE REBALANCING->RUNNING" in app.log_text()[since:]:
            return True
        time.sleep(0.5)
    return False


def test_an_application_moves_between_classic_and_streams_groups(broker_factory, tmp_path):
    """Kafka 4.4 converts only empty groups (GroupMetadataManager.getOrCreateStreamsGroup,
    classicGroupJoinToClassicGroup): the application stops, its classic group empties, and it
    restarts with group.protocol=streams on the same group and offsets; then back to classic.
    The counts stay exact across both moves."""
    broker = broker_factory(settings=STREAMS_BROKER)
    suffix = uuid.uuid4().hex[:6]
    app_id, src, dst = f"mv-{suffix}", f"events-{suffix}", f"counts-{suffix}"
    _create_topics(broker.bootstrap, (src, IN_PARTITIONS), (dst, OUT_PARTITIONS))
    classes = compile_streams_app("kafka44")
    classic = {"group.protocol": "classic", "session.timeout.ms": "6000"}

    def app(name: str, configs: dict[str, str]):
        return streams_app(classes, broker.bootstrap, app_id, src, dst, tmp_path / name,
                           threads=1, name=name, classpath="kafka44", configs=configs)

    runs = [app("classic", classic), app("streams", {"group.protocol": "streams"}),
            app("classic-again", classic)]
    reader = CountReader(broker.bootstrap, dst, OUT_PARTITIONS)
    step = EVENTS // 3
    try:
        for i, run in enumerate(runs):
            feed(broker.bootstrap, src, range(i * step, (i + 1) * step))
            run.start()
            reader.wait_complete((i + 1) * step, 120, lambda r=run: _dead(r))
            if run.name == "streams":
                assert app_id in _streams_groups_tool(broker.bootstrap, "--list").split()
            assert run.stop() is not None, run.log_tail()
            # a member that closed without leaving stays until its session ends (the classic
            # one 6 s, the streams one 10 s): the group is empty only then
            time.sleep(12)
        bad = reader.bad_sequences(EVENTS)
        assert not bad, describe_bad(bad, EVENTS)
        assert not reader.errors, reader.errors
    except AssertionError as exc:
        pytest.fail(f"{exc}\n" + "\n".join(r.log_tail() for r in runs), pytrace=False)
    finally:
        reader.close()
        for r in runs:
            r.stop()
    for r in runs:
        assert "UNCAUGHT" not in r.log_text(), r.log_tail()
        assert "STATE REBALANCING->RUNNING" in r.log_text(), r.log_tail()
