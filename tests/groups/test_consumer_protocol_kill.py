"""A consumer-protocol member killed with SIGKILL (KIP-848): two Java 4.x KafkaConsumers and a
confluent-kafka consumer with `group.protocol=consumer` share a 6-partition topic while records
keep coming, each committing what it read after every poll; one of them is killed -9. Its
partitions go to the others once `group.consumer.session.timeout.ms` has passed (not
before), the others resume them at the committed offsets, and at the end every record was
read, none read again after its offset was committed (only the killed member's uncommitted
tail is read twice: at-least-once)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tests.groups.clients import FAST, create_topic
from tests.support.broker import _PRCTL, REPO_ROOT, _die_with_parent
from tests.support.java import JAVA_SRC, JVM_ARGS, classpath_dir, compile_java, java_executable

SESSION_MS, HEARTBEAT_MS = 6000, 1000
SETTINGS = dict(FAST, **{"group.consumer.session.timeout.ms": SESSION_MS,
                         "group.consumer.min.session.timeout.ms": 1000,
                         "group.consumer.heartbeat.interval.ms": HEARTBEAT_MS})
PARTITIONS = 6


class Member:
    def __init__(self, name: str, cmd: list[str], out_dir: Path) -> None:
        self.name, self.cmd = name, cmd
        self.out, self.err = out_dir / f"{name}.stdout", out_dir / f"{name}.stderr"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Member:
        with open(self.out, "wb") as out, open(self.err, "wb") as err:
            self.proc = subprocess.Popen(
                self.cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=err, cwd=REPO_ROOT,
                start_new_session=True,
                preexec_fn=_die_with_parent if _PRCTL is not None else None)
        return self

    def kill9(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def events(self) -> list[dict]:
        out = []
        for line in self.out.read_text(errors="replace").splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                pass  # a line cut by the kill
        return out

    def assignment(self) -> set[int]:
        found = [e["assigned"] for e in self.events() if "assigned" in e]
        return set(found[-1]) if found else set()

    def describe(self) -> str:
        return (f"{self.name}: assignment {sorted(self.assignment())}, stderr: "
                f"{self.err.read_text(errors='replace')[-1500:]}")


class Feeder(threading.Thread):
    """Produces v0, v1, ... round robin over the partitions until stopped."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic = bootstrap, topic
        self.halt = threading.Event()
        self.acked: dict[str, int] = {}

    def run(self) -> None:
        p = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5})

        def acked(err: object, msg) -> None:  # noqa: ANN001
            if err is None:
                self.acked[msg.value().decode()] = msg.partition()

        i = 0
        while not self.halt.is_set():
            p.produce(self.topic, f"v{i}".encode(), partition=i % PARTITIONS, on_delivery=acked)
            p.poll(0)
            i += 1
            time.sleep(0.02)
        assert p.flush(30) == 0


def wait_for(cond, timeout: float, what: str, members: list[Member]) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}\n"
                                 + "\n".join(m.describe() for m in members))
        time.sleep(0.2)


def read_history(members: list[Member], feeder: Feeder) -> tuple[
        list[tuple[float, str, int, int, str]], list[tuple[float, int, int]],
        dict[tuple[int, int], list[str]], list[str]]:
    """Reads and successful commits of every member, in time order; who read each offset; and
    the problems: a record read from another partition than it was produced to, or read again
    after its offset had been committed."""
    reads = sorted((e["t"], m.name, p, o, v) for m in members for e in m.events()
                   for p, o, v in e.get("read", []))
    commits = sorted((e["t"], p, o) for m in members for e in m.events()
                     for p, o in e.get("committed", []))
    read_by: dict[tuple[int, int], list[str]] = {}
    problems = []
    for t, name, p, o, v in reads:
        if feeder.acked.get(v) != p:
            problems.append(f"{v} read at {p}@{o} but produced to {feeder.acked.get(v)}")
        committed = max((c for tc, cp, c in commits if cp == p and tc < t), default=0)
        prior = read_by.setdefault((p, o), [])
        if prior and o < committed:
            problems.append(f"{v} at {p}@{o} read by {prior} and again by {name} after "
                            f"offset {committed} was committed")
        prior.append(name)
    return reads, commits, read_by, problems


def resume_problems(lost: set[int], reads: list[tuple[float, str, int, int, str]],
                    commits: list[tuple[float, int, int]], victim: str,
                    t_kill: float) -> list[str]:
    """Each partition the victim lost must resume, with another member, at the offset
    committed before the kill, or later up to the end of what the victim read (it may have
    committed that before it could say so). The victim may have been handed a partition just
    before the kill (released by its previous owner, after that owner's last commit) and read
    none of it: then it committed none of it either, and the resumption is at that commit."""
    problems = []
    for p in sorted(lost):
        first = min((t, o) for t, name, q, o, _ in reads if q == p and t >= t_kill
                    and name != victim)[1]
        committed = max((c for tc, cp, c in commits if cp == p and tc < t_kill), default=0)
        end = max((o + 1 for _, name, q, o, _ in reads if q == p and name == victim),
                  default=0)
        if not committed <= first <= max(committed, end):
            problems.append(f"partition {p} resumed at {first}, committed {committed}, "
                            f"read up to {end}")
    return problems


@pytest.mark.timeout(240)
@pytest.mark.parametrize("victim", ["java-a", "librdkafka"])
def test_killed_consumer_protocol_member(broker_factory, tmp_path, victim):
    broker = broker_factory(settings=SETTINGS)
    b = broker.bootstrap
    u = uuid.uuid4().hex[:8]
    topic, group = f"k848kill-{u}", f"k848kill-group-{u}"
    create_topic(b, topic, PARTITIONS)
    classes = compile_java([JAVA_SRC / "GroupReader.java"], classpath="kafka4")
    java = [java_executable(), *JVM_ARGS, "-cp", f"{classes}:{classpath_dir('kafka4')}/*",
            "GroupReader", b, topic, group]
    members = {
        "java-a": Member("java-a", java, tmp_path),
        "java-b": Member("java-b", java, tmp_path),
        "librdkafka": Member("librdkafka", [sys.executable, "-m", "tests.groups.group_reader",
                                            b, topic, group], tmp_path),
    }
    feeder = Feeder(b, topic)
    feeder.start()
    for m in members.values():
        m.start()
    everyone = list(members.values())
    survivors = [m for n, m in members.items() if n != victim]
    try:
        wait_for(lambda: all(len(m.assignment()) == 2 for m in everyone)
                 and all(any("committed" in e for e in m.events()) for m in everyone),
                 90, "three members with two partitions each, each having committed",
                 everyone)
        lost = members[victim].assignment()
        members[victim].kill9()
        t_kill = time.time() * 1000
        wait_for(lambda: set().union(*(m.assignment() for m in survivors))
                 == set(range(PARTITIONS)), SESSION_MS / 1000 + 30,
                 "the survivors to own every partition", survivors)
        time.sleep(3)
        feeder.halt.set()
        feeder.join(30)

        def read_values() -> set[str]:
            return {v for m in everyone for e in m.events() for _, _, v in e.get("read", [])}

        wait_for(lambda: set(feeder.acked) <= read_values(), 60, "every record read",
                 everyone)
    finally:
        feeder.halt.set()
        for m in everyone:
            m.kill9()

    # The killed member's partitions moved once its session timed out (the session runs
    # from its last heartbeat, at most a heartbeat interval before the kill), not before.
    moved = min(e["t"] for m in survivors for e in m.events()
                if "assigned" in e and e["t"] >= t_kill and lost & set(e["assigned"]))
    assert SESSION_MS - HEARTBEAT_MS - 500 <= moved - t_kill <= SESSION_MS + 15000, (
        moved - t_kill)
    final = [m.assignment() for m in survivors]
    assert final[0].isdisjoint(final[1]) and final[0] | final[1] == set(range(PARTITIONS))

    reads, commits, read_by, problems = read_history(everyone, feeder)
    problems += resume_problems(lost, reads, commits, victim, t_kill)
    twice = {k: n for k, n in read_by.items() if len(n) > 1}
    print(f"{victim} killed owning {sorted(lost)}; moved after {moved - t_kill:.0f} ms; "
          f"{len(reads)} reads of {len(feeder.acked)} records, {len(twice)} read twice")
    assert not problems, problems[:10]
    assert all(n[0] == victim for n in twice.values()), twice  # only the killed one's tail
    assert set(feeder.acked) == {v for *_, v in reads}


@pytest.mark.parametrize(("victim_read", "resumed", "fine"), [
    ([], 29, True),  # handed p2 just before the kill, read none of it: the old owner's commit
    ([], 28, False),  # a committed record read again
    ([], 30, False),  # a record skipped
    ([29, 30, 31], 29, True),  # its reads not committed
    ([29, 30, 31], 32, True),  # committed before it could say so
    ([29, 30, 31], 33, False),  # past what it read
])
def test_resumption_bounds(victim_read: list[int], resumed: int, fine: bool) -> None:
    """The resumption check on a history where librdkafka read partition 2 up to 28 and
    committed 29, then released it to the victim, killed at 4000 ms, after reading
    `victim_read` of it; java-b resumed it at `resumed`."""
    reads = [(1000.0 + o, "librdkafka", 2, o, f"v{o}") for o in range(29)]
    reads += [(3800.0, "java-a", 2, o, f"v{o}") for o in victim_read]
    reads += [(11000.0, "java-b", 2, o, f"v{o}") for o in range(resumed, 40)]
    commits = [(1000.0 + o, 2, o + 1) for o in range(29)]
    found = resume_problems({2}, sorted(reads), commits, "java-a", 4000.0)
    assert (found == []) == fine, found
