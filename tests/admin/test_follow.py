"""`samsa consume --follow` against a Samsa broker: records written after it started are
printed as they come (one JSON object a line), and a group member reading for longer than
its session timeout keeps its place by heartbeating and commits as that member."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer

from samsa.broker import cli
from samsa.broker.admin import messages
from samsa.broker.admin.client import Admin, Settings
from tests.admin.conftest import Samsa
from tests.admin.test_groups import wait_for
from tests.support.broker import BrokerProcess


def _write(b: str, t: str, *values: str) -> None:
    p = Producer({"bootstrap.servers": b})
    for v in values:
        p.produce(t, v.encode(), partition=0)
    assert p.flush(30) == 0


def test_follow_prints_records_as_they_come(shared_broker: BrokerProcess, samsa: Samsa,
                                            capsys: pytest.CaptureFixture[str],
                                            unique_topic: str) -> None:
    b, t = shared_broker.bootstrap, unique_topic
    assert samsa("topic", "create", t, "-p", "1", bootstrap=b).rc == 0
    _write(b, t, "a", "b")
    capsys.readouterr()
    rc: list[int] = []
    reader = threading.Thread(target=lambda: rc.append(cli.main([
        "consume", t, "--from-beginning", "--follow", "-n", "4", "--format", "json",
        "-b", b])))
    reader.start()
    time.sleep(1.5)  # past the end of the partition: the command waits for more
    assert reader.is_alive()
    _write(b, t, "c", "d")
    reader.join(30)
    assert not reader.is_alive() and rc == [0]
    captured = capsys.readouterr()
    rows = [json.loads(line) for line in captured.out.splitlines()]
    assert [(r["offset"], r["value"]) for r in rows] == [(0, "a"), (1, "b"), (2, "c"),
                                                         (3, "d")]
    assert captured.err == "Processed a total of 4 messages\n"


def test_follow_with_a_group_outlives_the_session_timeout(shared_broker: BrokerProcess,
                                                          samsa: Samsa,
                                                          unique_topic: str) -> None:
    """session.timeout.ms 6000 (the broker's least) and a follow of 9 s: the heartbeats keep
    the member, so the record written after 7 s is read and the commit at the end is
    accepted as the member's (without heartbeats the coordinator has dropped it by then and
    the commit fails UNKNOWN_MEMBER_ID)."""
    b, t, g = shared_broker.bootstrap, unique_topic, f"g-{unique_topic}"
    assert samsa("topic", "create", t, "-p", "1", bootstrap=b).rc == 0
    _write(b, t, "early")
    seen: list[dict[str, Any]] = []
    started: list[float] = []

    def stop() -> bool:
        """Past 7 s of reading (the group's join, slowed by its initial rebalance delay, is
        not counted) write the late record; stop after 9 s."""
        if not started:
            started.append(time.monotonic())
        elapsed = time.monotonic() - started[0]
        if elapsed > 7 and len(started) == 1:
            _write(b, t, "late")
            started.append(elapsed)
        return (elapsed > 9 and len(seen) >= 2) or elapsed > 30

    settings = Settings({"bootstrap.servers": b, "session.timeout.ms": "6000",
                         "heartbeat.interval.ms": "1000"})
    with Admin(settings) as admin:
        count = messages.follow(admin, t, seen.append, group=g, from_beginning=True,
                                stop=stop)
    assert count == 2 and [r["value"] for r in seen] == ["early", "late"]
    (desc,) = samsa("group", "describe", g, "--format", "json", bootstrap=b).json()
    assert [(o["current_offset"], o["lag"]) for o in desc["offsets"]] == [(2, 0)]
    assert desc["state"] == "Empty"  # it left at the end


def test_follow_with_a_group_joins_again_when_the_group_rebalances(
        shared_broker: BrokerProcess, samsa: Samsa, unique_topic: str) -> None:
    """A librdkafka member joins while the command follows both partitions: the command's
    heartbeat learns of the rebalance, it commits and joins again, and each member then
    reads one partition (the command only its own one's new record)."""
    b, t, g = shared_broker.bootstrap, unique_topic, f"g-{unique_topic}"
    assert samsa("topic", "create", t, "-p", "2", bootstrap=b).rc == 0
    seen: list[dict[str, Any]] = []
    done = threading.Event()
    settings = Settings({"bootstrap.servers": b, "session.timeout.ms": "10000",
                         "heartbeat.interval.ms": "300"})

    def run() -> None:
        with Admin(settings) as admin:
            messages.follow(admin, t, seen.append, group=g, stop=done.is_set)

    reader = threading.Thread(target=run)
    reader.start()
    other = Consumer({"bootstrap.servers": b, "group.id": g, "group.protocol": "classic",
                      "session.timeout.ms": 10000, "auto.offset.reset": "latest"})
    try:
        wait_for("the command alone in the group, Stable", lambda: _members(
            samsa, b, g) == (1, "Stable"), lambda: time.sleep(0.2))
        other.subscribe([t])
        wait_for("one partition each", lambda: len(other.assignment()) == 1 and
                 _members(samsa, b, g) == (2, "Stable"), lambda: other.poll(0.2))
        (theirs,) = [tp.partition for tp in other.assignment()]
        p = Producer({"bootstrap.servers": b})
        p.produce(t, b"to-0", partition=0)
        p.produce(t, b"to-1", partition=1)
        assert p.flush(30) == 0
        wait_for("the command's record", lambda: seen, lambda: other.poll(0.2))
        time.sleep(1)  # (a record of the other partition would show meanwhile)
    finally:
        done.set()
        reader.join(30)
        other.close()
    assert [(r["partition"], r["value"]) for r in seen] == [
        (1 - theirs, f"to-{1 - theirs}")]


def _members(samsa: Samsa, b: str, g: str) -> tuple[int, str | None]:
    """How many members the group has, and its state."""
    r = samsa("group", "describe", g, "--format", "json", bootstrap=b)
    return (len(r.json()[0]["members"]), r.json()[0]["state"]) if r.rc == 0 else (0, None)


def _interruptible() -> None:
    """Ctrl-C as a terminal's shell leaves it to a command: a run started in the background
    (`make test &`, nohup) ignores SIGINT, which its children inherit, and Python installs no
    KeyboardInterrupt where it starts with SIGINT ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_an_interrupted_follow_commits_and_leaves(shared_broker: BrokerProcess, samsa: Samsa,
                                                  unique_topic: str) -> None:
    """Ctrl-C (SIGINT to the command, as a terminal sends it) ends a follow with 0: the
    offsets reached are committed on new connections and the member leaves, as
    kafka-console-consumer.sh does."""
    b, t, g = shared_broker.bootstrap, unique_topic, f"g-{unique_topic}"
    assert samsa("topic", "create", t, "-p", "1", bootstrap=b).rc == 0
    _write(b, t, "a", "b", "c")
    proc = subprocess.Popen(
        [sys.executable, "-m", "samsa", "consume", t, "-g", g, "--from-beginning", "--follow",
         "-b", b], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=_interruptible)
    try:
        assert proc.stdout is not None
        printed = [proc.stdout.readline() for _ in range(3)]  # the three records, then wait
        wait_for("the member in the group", lambda: _members(samsa, b, g)[0] == 1,
                 lambda: time.sleep(0.2))
        proc.send_signal(signal.SIGINT)
        rest, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert (proc.returncode, "".join(printed) + rest, err) == (
        0, "a\nb\nc\n", "Processed a total of 3 messages\n")
    (desc,) = samsa("group", "describe", g, "--format", "json", bootstrap=b).json()
    assert [(o["current_offset"], o["lag"]) for o in desc["offsets"]] == [(3, 0)]
    assert desc["state"] == "Empty"
