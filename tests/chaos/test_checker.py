"""The queue checker catches each anomaly it claims to (a checker that cannot fail proves
nothing), and stays quiet on a clean history full of legitimate oddities (aborted
transactions skipped over, markers leaving offset gaps, indeterminate transactions that
committed or aborted as a whole, one consumer re-reading offsets after a restart)."""

from __future__ import annotations

import pytest

from tests.chaos.checker import ANOMALIES, Read, Recorder, Write, check, load_history

T = "q"


def clean_history() -> Recorder:
    rec = Recorder()
    # p0: committed txn on partitions 0 and 1 (offsets 0,1 and 0), commit marker after each.
    rec.send("p0", "ok", [Write(T, 0, "a", 0), Write(T, 0, "b", 1), Write(T, 1, "c", 0)])
    # p1: aborted on purpose (offset 3, marker at 4): never visible.
    rec.send("p1", "aborted", [Write(T, 0, "x", 3)])
    # p1: commit raised, but it did commit (all of it visible).
    rec.send("p1", "info", [Write(T, 0, "d", 5), Write(T, 1, "e", 2)])
    # p2: commit raised and it did not commit (nothing visible).
    rec.send("p2", "info", [Write(T, 1, "y", 4)])
    # p2: a committed txn whose send was never acknowledged to us, read anyway.
    rec.send("p2", "ok", [Write(T, 1, "f", None)])
    rec.poll("c0/1", [Read(T, 0, 0, "a"), Read(T, 0, 1, "b")])
    rec.poll("c0/1", [Read(T, 1, 0, "c"), Read(T, 0, 5, "d")])  # gap 2..4: marker/aborted
    rec.poll("c0/1", [Read(T, 1, 2, "e"), Read(T, 1, 6, "f")])
    # c0 restarted: a new process may read everything again.
    rec.poll("c0/2", [Read(T, 0, 0, "a"), Read(T, 0, 1, "b"), Read(T, 0, 5, "d")])
    rec.poll("c1/1", [Read(T, 1, 0, "c"), Read(T, 1, 2, "e"), Read(T, 1, 6, "f")])
    return rec


def test_clean_history_has_no_anomaly():
    rep = check(clean_history().history())
    assert rep.ok, rep.text()
    assert rep.sends == {"ok": 2, "aborted": 1, "info": 2}
    assert rep.distinct_read == 6


def _with(mutate) -> dict[str, int]:
    rec = clean_history()
    mutate(rec)
    return check(rec.history()).counts()


CASES = {
    # acknowledged in a committed transaction, never read by anyone
    "lost": lambda r: r.send("p3", "ok", [Write(T, 0, "g", 7)]),
    # the same value at two offsets (a retried batch appended twice)
    "duplicate": lambda r: r.poll("c3/1", [Read(T, 0, 9, "a")]),
    # read_committed returned a record of an aborted transaction
    "aborted_read": lambda r: r.poll("c1/1", [Read(T, 0, 3, "x")]),
    # a value nobody wrote
    "phantom_read": lambda r: r.poll("c1/1", [Read(T, 0, 10, "zz")]),
    # two consumers disagree on what offset 1 holds
    "inconsistent_offset": lambda r: r.poll("c2/1", [Read(T, 0, 1, "a2")])
    or r.send("p9", "info", [Write(T, 0, "a2", None)]),
    # a consumer went backwards without restarting
    "nonmonotonic_poll": lambda r: r.poll("c0/1", [Read(T, 0, 1, "b")]),
    # c2 jumped over offset 1, which others read as committed
    "skipped_read": lambda r: r.poll("c2/1", [Read(T, 0, 0, "a"), Read(T, 0, 5, "d")]),
    # an indeterminate transaction seen half-applied
    "partial_txn": lambda r: r.send("p4", "info", [Write(T, 0, "h", 11), Write(T, 1, "i", 12)])
    or r.poll("c1/1", [Read(T, 0, 11, "h")]),
}


@pytest.mark.parametrize("anomaly", ANOMALIES)
def test_checker_catches(anomaly):
    counts = _with(CASES[anomaly])
    assert counts[anomaly] >= 1, counts
    # and it is reported as that anomaly, not only as some other one
    others = {k: v for k, v in counts.items() if v and k != anomaly}
    assert not others, counts


def test_offset_acknowledged_for_another_value():
    counts = _with(lambda r: r.send("p5", "ok", [Write(T, 1, "k", 6)]))  # f was read at 6
    assert counts["inconsistent_offset"] == 1 and counts["lost"] == 1, counts


def test_lost_write_in_committed_txn_is_also_partial():
    rec = clean_history()
    rec.send("p6", "ok", [Write(T, 0, "m", 20), Write(T, 0, "n", 21)])
    rec.poll("c1/1", [Read(T, 0, 20, "m")])
    rep = check(rec.history())
    assert rep.counts()["lost"] == 1 and rep.counts()["partial_txn"] == 1
    assert "'n'" in rep.text() and not rep.ok


def test_history_round_trips_through_json(tmp_path):
    rec = clean_history()
    CASES["duplicate"](rec)
    path = tmp_path / "history.jsonl"
    rec.dump(str(path))
    assert check(load_history(str(path))).counts() == check(rec.history()).counts()
