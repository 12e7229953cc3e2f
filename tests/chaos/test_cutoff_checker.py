"""The cut-off workload's checks (tests/chaos/cutoff.py) on made-up histories and replica logs:
each anomaly is found, named with its partition, offsets, producer id/epoch/sequence and the
leader of the batch's epoch, and a clean history passes."""

from __future__ import annotations

from samsa.protocol.records import BatchHeader
from samsa.protocol.records import build_batch as _build
from tests.chaos.cutoff import Batch, History, LeaderLog, check, implicit_acks


def _batch(base: int, values: list[str], epoch: int, seq: int, pid: int = 7) -> Batch:
    raw = _build([(None, v.encode()) for v in values], base, partition_leader_epoch=epoch,
                 producer_id=pid, producer_epoch=0, base_sequence=seq)
    return Batch(BatchHeader.parse(raw), raw)


def _leaders() -> LeaderLog:
    log = LeaderLog(None, "t", 0.0)  # type: ignore[arg-type]  # never started
    log.epoch_leaders[(0, 1)] = {0}
    log.epoch_leaders[(0, 2)] = {1}
    return log


def _history() -> History:
    h = History()
    h.sent = {"a", "b", "c", "t1", "t2", "x"}
    h.acked = {"a": (0, 0), "b": (0, 1), "t1": (0, 2)}
    h.aborted = {"t2"}
    h.info_txns = [["c", "x"]]
    return h


def test_a_clean_history_passes():
    logs = {0: {b: [_batch(0, ["a", "b"], 1, 0), _batch(2, ["t1"], 1, 2)] for b in range(3)}}
    reads = {iso: {"a": [(0, 0)], "b": [(0, 1)], "t1": [(0, 2)]}
             for iso in ("read_uncommitted", "read_committed")}
    found = check(_history(), reads, logs, _leaders())
    assert not any(found.values()), found


def test_each_anomaly_is_found_and_described():
    # b written again at offset 3 by the next leader (epoch 2) with its original sequence
    good = [_batch(0, ["a", "b"], 1, 0), _batch(2, ["t1"], 1, 2), _batch(3, ["b"], 2, 1)]
    logs = {0: {0: good, 1: good, 2: good[:2]}}
    rc = {"a": [(0, 5)], "b": [(0, 1), (0, 3)], "t2": [(0, 4)], "c": [(0, 6)], "y": [(0, 7)]}
    found = check(_history(), {"read_committed": rc}, logs, _leaders())
    assert found["lost"] == ["read_committed: t1 acked at p0@2, never read; offset 2: pid 7 "
                             "epoch 0 seq 2 (batch 2-2, base seq 2), leader epoch 1 led by "
                             "broker 0 (from broker 0's log)"]
    dup = found["duplicate"]
    assert len(dup) == 1 and "b acked at p0@1, read at [(0, 1), (0, 3)]" in dup[0]
    assert "offset 3: pid 7 epoch 0 seq 1 (batch 3-3, base seq 1), leader epoch 2 led by " \
           "broker 1" in dup[0], dup
    assert found["moved"] == ["read_committed: a acked at p0@0, read at (0, 5); offset 0: "
                              "pid 7 epoch 0 seq 0 (batch 0-1, base seq 0), leader epoch 1 "
                              "led by broker 0 (from broker 0's log)"]
    assert found["aborted_read"] == ["t2 of an aborted transaction read at [(0, 4)]"]
    assert found["partial_txn"] == ["read ['c'] of ['c', 'x']"]
    assert found["phantom"] == ["read_committed: y read at [(0, 7)], never sent"]
    assert len(found["replica_divergence"]) == 1
    assert found["replica_divergence"][0].startswith(
        "p0: broker 2 differs from broker 0 at batch 2: ends at offset 3 vs batch 3-3 pid 7")


def test_an_acknowledgement_without_offset_is_checked_and_reported_apart():
    h = _history()
    h.acked["b"] = (0, None)  # librdkafka reports offset -1 as None
    logs = {0: {b: [_batch(0, ["a", "b"], 1, 0), _batch(2, ["t1"], 1, 2)] for b in range(3)}}
    rc = {"a": [(0, 0)], "b": [(0, 1)], "t1": [(0, 2)]}
    found = check(h, {"read_committed": rc}, logs, _leaders())
    assert found["no_offset"] == ["read_committed: b acked at p0 without an offset, read at "
                                  "(0, 1); offset 1: pid 7 epoch 0 seq 1 (batch 0-1, base seq "
                                  "0), leader epoch 1 led by broker 0 (from broker 0's log)"]
    assert not found["moved"] and not found["lost"]
    # librdkafka's implicit acknowledgement, not an anomaly: listed in the notes
    line = found["no_offset"][0]
    assert implicit_acks(found) == ["acknowledged without an offset (librdkafka's implicit "
                                    "acknowledgement), read once: " + line]
    assert "no_offset" not in found and not any(found.values())
