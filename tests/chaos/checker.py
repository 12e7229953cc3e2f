"""A history recorder and checker for a transactional queue, in the spirit of Jepsen's Kafka
workload (`jepsen.tests.kafka`).

Clients record what they did; the checker looks only at that record:

    rec = Recorder()
    rec.send(process="p0", outcome="ok", writes=[Write("t", 0, "p0-1", offset=7), ...])
    rec.poll(process="c0/1", records=[Read("t", 0, 7, "p0-1"), ...])
    report = check(rec.history())
    report.ok, report.counts(), report.text()

A send is one transaction. Its outcome is what the client knows for certain:

    ok       commit_transaction() returned: every write must become visible (exactly once)
    aborted  the client aborted on purpose and abort_transaction() returned: no write may
             ever be visible to read_committed
    info     indeterminate (commit or abort raised, the client died): writes may or may not
             be visible, but all or none of them

A write's `offset` is the offset its delivery report acknowledged (None if it was never
acknowledged). A poll is one `consume()` of one read_committed consumer process; a process
never seeks, so it must see each partition's offsets strictly increasing. A consumer that is
recreated gets a new process name.

Anomalies reported, each with a count and examples:

    lost                 a write of an ok transaction never read by anyone
    duplicate            one value read at two or more different offsets
    aborted_read         a value of an aborted transaction read
    phantom_read         a value read that no client ever sent
    inconsistent_offset  one offset read with two values, or read with a value other than the
                         one whose write was acknowledged there
    nonmonotonic_poll    a consumer process read offset <= one it had read before (partition)
    skipped_read         a consumer process jumped from offset a to b on a partition while
                         some other read saw a committed value at an offset between them
    partial_txn          an info or ok transaction of which some writes were read, not all
"""

from __future__ import annotations

import json
import threading
import time
from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Literal

Outcome = Literal["ok", "aborted", "info"]
ANOMALIES = (
    "lost",
    "duplicate",
    "aborted_read",
    "phantom_read",
    "inconsistent_offset",
    "nonmonotonic_poll",
    "skipped_read",
    "partial_txn",
)
TP = tuple[str, int]


@dataclass(frozen=True)
class Write:
    topic: str
    partition: int
    value: str
    offset: int | None = None  # acknowledged offset, None if never acknowledged


@dataclass(frozen=True)
class Read:
    topic: str
    partition: int
    offset: int
    value: str


@dataclass
class SendOp:
    process: str
    outcome: Outcome
    writes: list[Write]
    time: float = 0.0
    note: str = ""
    type: str = "send"


@dataclass
class PollOp:
    process: str
    records: list[Read]
    time: float = 0.0
    type: str = "poll"


Op = SendOp | PollOp


class Recorder:
    """Thread-safe, append-only history; `dump(path)` writes one JSON op per line."""

    def __init__(self) -> None:
        self._ops: list[Op] = []
        self._lock = threading.Lock()
        self.t0 = time.monotonic()

    def _now(self) -> float:
        return round(time.monotonic() - self.t0, 3)

    def send(self, process: str, outcome: Outcome, writes: Iterable[Write], note: str = "") -> None:
        op = SendOp(process, outcome, list(writes), self._now(), note)
        with self._lock:
            self._ops.append(op)

    def poll(self, process: str, records: Iterable[Read]) -> None:
        recs = list(records)
        if not recs:
            return
        op = PollOp(process, recs, self._now())
        with self._lock:
            self._ops.append(op)

    def history(self) -> list[Op]:
        with self._lock:
            return list(self._ops)

    def dump(self, path: str) -> None:
        with open(path, "w") as f:
            for op in self.history():
                f.write(json.dumps(asdict(op)) + "\n")


def load_history(path: str) -> list[Op]:
    ops: list[Op] = []
    with open(path) as f:
        for line in f:
            d = json.loads(line)
            if d["type"] == "send":
                ops.append(SendOp(d["process"], d["outcome"], [Write(**w) for w in d["writes"]],
                                  d["time"], d.get("note", "")))
            else:
                ops.append(PollOp(d["process"], [Read(**r) for r in d["records"]], d["time"]))
    return ops


@dataclass
class Report:
    anomalies: dict[str, list[str]] = field(default_factory=lambda: {a: [] for a in ANOMALIES})
    sends: dict[str, int] = field(default_factory=dict)  # outcome -> transactions
    writes: dict[str, int] = field(default_factory=dict)  # outcome -> writes
    polls: int = 0
    reads: int = 0
    distinct_read: int = 0

    def add(self, kind: str, example: str) -> None:
        self.anomalies[kind].append(example)

    @property
    def ok(self) -> bool:
        return not any(self.anomalies.values())

    def counts(self) -> dict[str, int]:
        return {k: len(v) for k, v in self.anomalies.items()}

    def text(self, examples: int = 5) -> str:
        lines = [
            f"transactions: {dict(sorted(self.sends.items()))}; "
            f"writes: {dict(sorted(self.writes.items()))}",
            f"polls: {self.polls}, records read: {self.reads}, distinct values read: "
            f"{self.distinct_read}",
            "anomalies: " + ", ".join(f"{n} {k}" for k, n in self.counts().items()),
        ]
        for kind, found in self.anomalies.items():
            for ex in found[:examples]:
                lines.append(f"  {kind}: {ex}")
            if len(found) > examples:
                lines.append(f"  {kind}: ... and {len(found) - examples} more")
        return "\n".join(lines)


def check(history: Iterable[Op]) -> Report:
    rep = Report()
    sends = [op for op in history if isinstance(op, SendOp)]
    polls = [op for op in history if isinstance(op, PollOp)]
    rep.polls = len(polls)

    # value -> (transaction index, outcome); where each acknowledged write landed
    writer: dict[str, tuple[int, Outcome]] = {}
    acked_at: dict[tuple[str, int, int], str] = {}
    for i, s in enumerate(sends):
        rep.sends[s.outcome] = rep.sends.get(s.outcome, 0) + 1
        rep.writes[s.outcome] = rep.writes.get(s.outcome, 0) + len(s.writes)
        for w in s.writes:
            writer[w.value] = (i, s.outcome)
            if w.offset is not None:
                acked_at[(w.topic, w.partition, w.offset)] = w.value

    # Every read: where each value was seen, what each offset held.
    positions: dict[str, set[tuple[str, int, int]]] = defaultdict(set)
    at_offset: dict[tuple[str, int, int], set[str]] = defaultdict(set)
    read_offsets: dict[TP, set[int]] = defaultdict(set)
    for p in polls:
        for r in p.records:
            rep.reads += 1
            positions[r.value].add((r.topic, r.partition, r.offset))
            at_offset[(r.topic, r.partition, r.offset)].add(r.value)
            if writer.get(r.value, (0, "ok"))[1] != "aborted":  # aborted reads: reported apart
                read_offsets[(r.topic, r.partition)].add(r.offset)
    rep.distinct_read = len(positions)

    for value, where in sorted(positions.items()):
        if len(where) > 1:
            rep.add("duplicate", f"{value!r} read at {sorted(where)}")
        origin = writer.get(value)
        if origin is None:
            rep.add("phantom_read", f"{value!r} read at {sorted(where)} was never sent")
        elif origin[1] == "aborted":
            rep.add("aborted_read", f"{value!r} (aborted transaction #{origin[0]} by "
                                    f"{sends[origin[0]].process}) read at {sorted(where)}")

    for (topic, part, off), values in sorted(at_offset.items()):
        acked = acked_at.get((topic, part, off))
        if len(values) > 1:
            rep.add("inconsistent_offset", f"{topic}-{part}@{off} read as {sorted(values)}")
        elif acked is not None and acked not in values:
            rep.add("inconsistent_offset", f"{topic}-{part}@{off} acknowledged for {acked!r}, "
                                           f"read as {sorted(values)}")

    for i, s in enumerate(sends):
        if not s.writes or s.outcome == "aborted":
            continue
        seen = [w for w in s.writes if w.value in positions]
        unseen = [w for w in s.writes if w.value not in positions]
        if s.outcome == "ok":
            for w in unseen:
                where = "" if w.offset is None else f" (acknowledged at offset {w.offset})"
                rep.add("lost", f"{w.value!r} to {w.topic}-{w.partition}{where}, committed "
                                f"transaction #{i} by {s.process}")
        if seen and unseen:
            rep.add("partial_txn", f"transaction #{i} by {s.process} ({s.outcome}): read "
                                   f"{[w.value for w in seen][:5]}, never read "
                                   f"{[w.value for w in unseen][:5]}")

    # Per consumer process: offsets strictly increasing per partition, and no committed
    # value that somebody else read skipped over.
    sorted_offsets = {tp: sorted(offs) for tp, offs in read_offsets.items()}
    last: dict[tuple[str, TP], int] = {}
    for p in polls:
        for r in p.records:
            key = (p.process, (r.topic, r.partition))
            prev = last.get(key)
            if prev is not None:
                if r.offset <= prev:
                    rep.add("nonmonotonic_poll", f"{p.process} read {r.topic}-{r.partition}@"
                                                 f"{r.offset} after @{prev} (t={p.time})")
                elif r.offset > prev + 1:
                    seen = sorted_offsets[(r.topic, r.partition)]
                    between = seen[bisect_right(seen, prev):bisect_left(seen, r.offset)]
                    if between:
                        rep.add("skipped_read", f"{p.process} jumped {r.topic}-{r.partition} "
                                                f"@{prev} -> @{r.offset} over offsets read "
                                                f"elsewhere {sorted(between)[:5]} "
                                                f"(t={p.time})")
            last[key] = max(r.offset, prev) if prev is not None else r.offset
    return rep
