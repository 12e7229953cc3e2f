"""The Java 4.x KafkaShareConsumer (KIP-932) against ShareFetch/ShareAcknowledge: several
consumers share one partition with explicit accept/release/reject, and the records a killed
consumer held come back to another one (released when its connection closes, as in Kafka, or
at the latest when their acquisition lock expires)."""

from __future__ import annotations

import re
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.groups.clients import produce
from tests.groups.test_share_fetch_wire import SHARE, setup_share_group
from tests.protocol.wire import WireClient
from tests.support.java import JAVA_SRC, JavaProcess, compile_java, run_java_tool


def _lines(text: str, kind: str) -> list[list[str]]:
    return [m.split() for m in re.findall(rf"^{kind} (.*)$", text, re.M)]


@pytest.mark.timeout(300)
def test_java_share_consumers_accept_release_reject(broker_factory):
    b = broker_factory(settings=SHARE)
    classes = compile_java([JAVA_SRC / "ShareConsumers.java"], classpath="kafka4")
    with WireClient(b.bootstrap) as w:
        setup_share_group(w, "share-java", "sg-java", [])
    produce(b.bootstrap, "share-java", 1, 60)
    res = run_java_tool("ShareConsumers", ["explicit", b.bootstrap, "share-java", "sg-java",
                                           "3", "60"], extra_classpath=[classes], timeout=200)
    assert not res.timed_out and res.returncode == 0, res.describe()
    accepted = {v: (int(count), who) for v, count, who in _lines(res.stdout, "ACCEPTED")}
    rejected = {v for (v,) in _lines(res.stdout, "REJECTED")}
    released = {v for (v,) in _lines(res.stdout, "RELEASED")}
    assert not _lines(res.stdout, "TWICE"), res.describe()
    assert rejected == {f"v{i}" for i in range(7, 60, 10)}
    assert released == {f"v{i}" for i in range(3, 60, 10)}
    assert set(accepted) == {f"v{i}" for i in range(60) if i % 10 != 7}
    # a released record came back with its second delivery; the others at their first
    assert {v for v, (count, _) in accepted.items() if count != 1} == released
    assert all(accepted[v][0] == 2 for v in released)
    assert len(Counter(who for _, who in accepted.values())) >= 2, res.describe()


def hold_records(bootstrap: str, topic: str, group: str, classes: Path,
                 log_path: Path) -> tuple[JavaProcess, int]:
    """A Java share consumer that got records and holds them, never acknowledging them (kill9
    it when done), and how many its poll returned."""
    holder = JavaProcess("ShareConsumers", ["hold", bootstrap, topic, group],
                         log_path=log_path, extra_classpath=[classes]).start()
    try:
        deadline = time.monotonic() + 90
        while "HELD" not in holder.log_text() and time.monotonic() < deadline:
            time.sleep(0.2)
        found = re.search(r"^HELD (\d+)", holder.log_text(), re.M)
        assert found is not None, holder.log_tail()
    except BaseException:
        holder.kill9()
        raise
    return holder, int(found.group(1))


@pytest.mark.timeout(300)
def test_java_killed_share_consumer_records_go_to_another(broker_factory, tmp_path):
    b = broker_factory(settings={**SHARE, "group.share.record.lock.duration.ms": 3000})
    classes = compile_java([JAVA_SRC / "ShareConsumers.java"], classpath="kafka4")
    with WireClient(b.bootstrap) as w:
        setup_share_group(w, "share-kill", "sg-kill", [])
    produce(b.bootstrap, "share-kill", 1, 5)
    holder, held = hold_records(b.bootstrap, "share-kill", "sg-kill", classes,
                                tmp_path / "hold.log")
    holder.kill9()
    res = run_java_tool("ShareConsumers", ["drain", b.bootstrap, "share-kill", "sg-kill", "5"],
                        extra_classpath=[classes], timeout=120)
    assert not res.timed_out and res.returncode == 0, res.describe()
    counts = {v: int(count) for v, count, _ in _lines(res.stdout, "ACCEPTED")}
    assert set(counts) == {f"v{i}" for i in range(5)}
    # the held records were delivered a second time
    assert set(counts.values()) <= {1, 2}, res.describe()
    assert sum(1 for c in counts.values() if c == 2) >= held, res.describe()
