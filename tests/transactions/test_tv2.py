"""Feature levels (KIP-584) and `transaction.version`, over the raw wire.

ApiVersions v3+ lists what the broker supports and what the cluster finalized; UpdateFeatures
changes the finalized level with Kafka's checks and error; the level survives a restart; and at
transaction.version 1 the coordinator writes the flexible TransactionLogValue v1, which Kafka's
own decoder (kafka-dump-log) reads and a restarted coordinator loads. AddPartitionsToTxn v4-v5,
the broker-to-coordinator batched form: VerifyOnly checks, plain adds. Transactions v2
(KIP-890 part 2): Produce v12 without AddPartitionsToTxn, EndTxn v5's epoch bump and retries,
and a Kafka 4.x producer (with send_offsets: TxnOffsetCommit v5) negotiating it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from samsa.protocol.records import build_batch, decode_records, iter_batches
from tests.support.java import run_java_tool
from tests.transactions.txnwire import (
    CONCURRENT_TRANSACTIONS,
    END_TXN,
    NONE,
    TxnWire,
    committed_values,
    markers,
    txn_batch,
)

API_VERSIONS, UPDATE_FEATURES = 18, 57
INVALID_UPDATE_VERSION = 95
TV = "transaction.version"
GV = "group.version"  # KIP-848, finalized at 1 on a new cluster as well
SV = "share.version"  # KIP-932 share groups, likewise (Kafka 4.2+)
STV = "streams.version"  # KIP-1071 streams groups, likewise (Kafka 4.4)
UPGRADE, SAFE_DOWNGRADE = 1, 2


def api_versions(w: TxnWire, version: int = 4) -> Any:
    body = {"client_software_name": "samsa-tests", "client_software_version": "1.0"}
    r = w.call(API_VERSIONS, version, body if version >= 3 else {})
    assert r.error_code == NONE
    return r


def finalized(w: TxnWire) -> dict[str, int]:
    r = api_versions(w)
    assert r.finalized_features_epoch >= 0
    for f in r.finalized_features:
        assert f.min_version_level == f.max_version_level
    return {f.name: f.max_version_level for f in r.finalized_features}


def update(w: TxnWire, updates: dict[str, tuple[int, int]], version: int = 1,
           validate_only: bool = False) -> Any:
    body: dict[str, Any] = {"feature_updates": [
        {"feature": name, "max_version_level": level, "upgrade_type": kind}
        for name, (level, kind) in updates.items()
    ]}
    if version >= 1:
        body["validate_only"] = validate_only
    return w.call(UPDATE_FEATURES, version, body)


def test_api_versions_lists_transaction_version(broker):
    with TxnWire(broker.bootstrap) as w:
        v4 = api_versions(w, 4)
        assert [(f.name, f.min_version, f.max_version) for f in v4.supported_features] == [
            (GV, 0, 1), (SV, 0, 1), (STV, 0, 1), (TV, 0, 2)]
        # A new cluster finalizes transactions v2, as Kafka 4.x does, share groups, as
        # Kafka 4.3 does, and streams groups, as Kafka 4.4 does.
        assert [(f.name, f.max_version_level) for f in v4.finalized_features] == [
            (GV, 1), (SV, 1), (STV, 1), (TV, 2)]
        assert v4.finalized_features_epoch == 0
        # v0-v3 omit supported features whose minimum is 0 (KAFKA-17011).
        assert api_versions(w, 3).supported_features == ()
        assert 57 in {k.api_key for k in v4.api_keys}


def test_initial_feature_levels_choose_a_new_clusters_levels(broker_factory):
    """initial.feature.levels: transactions v1 and the classic group protocol (share.version
    and streams.version not named: their defaults, 1); then transactions v1 and no share
    groups."""
    b = broker_factory({"initial.feature.levels": "transaction.version=1,group.version=0"})
    with TxnWire(b.bootstrap) as w:
        assert finalized(w) == {TV: 1, SV: 1, STV: 1}
        assert 68 not in {k.api_key for k in api_versions(w).api_keys}  # group.version 0
    b.stop()
    b = broker_factory({"initial.feature.levels": "share.version=0,transaction.version=1"})
    with TxnWire(b.bootstrap) as w:
        assert finalized(w) == {GV: 1, STV: 1, TV: 1}
        assert 76 not in {k.api_key for k in api_versions(w).api_keys}  # share.version 0
    b.stop()
    b.start()  # the levels are the cluster's now: read once, when it was created
    with TxnWire(b.bootstrap) as w:
        assert finalized(w) == {GV: 1, STV: 1, TV: 1}


def test_update_features_checks_and_persists(broker):
    with TxnWire(broker.bootstrap) as w:
        assert update(w, {TV: (0, SAFE_DOWNGRADE)}).error_code == NONE
        bad = [
            ({"no.such.version": (1, UPGRADE)}, "does not support this feature"),
            ({TV: (3, UPGRADE)}, "only supports versions 0-2"),
            ({TV: (-1, SAFE_DOWNGRADE)}, "cannot be less than 0"),
            ({TV: (1, SAFE_DOWNGRADE)}, "Can't downgrade to a newer version"),
        ]
        for updates, reason in bad:
            r = update(w, updates)
            assert r.error_code == INVALID_UPDATE_VERSION, updates
            assert reason in r.error_message, r.error_message
            assert r.results == ()
        r = update(w, {TV: (1, UPGRADE)}, validate_only=True)
        assert (r.error_code, [(x.feature, x.error_code) for x in r.results]) == (
            NONE, [(TV, NONE)])
        assert finalized(w) == {GV: 1, SV: 1, STV: 1}

        epoch = api_versions(w).finalized_features_epoch
        r = update(w, {TV: (1, UPGRADE)}, version=2)
        assert r.error_code == NONE, r
        assert finalized(w) == {GV: 1, SV: 1, STV: 1, TV: 1}
        assert api_versions(w).finalized_features_epoch > epoch
        r = update(w, {TV: (0, UPGRADE)})
        assert r.error_code == INVALID_UPDATE_VERSION
        assert "without setting the upgrade type" in r.error_message

    broker.restart()
    with TxnWire(broker.bootstrap) as w:
        assert finalized(w) == {GV: 1, SV: 1, STV: 1, TV: 1}
        assert update(w, {TV: (0, SAFE_DOWNGRADE)}).error_code == NONE
        assert finalized(w) == {GV: 1, SV: 1, STV: 1}


def _txn_state_values(data_dir: Path) -> list[bytes]:
    values = []
    for seg in sorted(data_dir.glob("__transaction_state-*/*.log")):
        buf = seg.read_bytes()
        for pos, h in iter_batches(buf):
            values += [r.value for r in decode_records(buf, pos, h) if r.value is not None]
    return values


def test_transaction_version_1_writes_log_value_v1(broker, unique_topic):
    with TxnWire(broker.bootstrap) as w:
        assert update(w, {TV: (1, SAFE_DOWNGRADE)}).error_code == NONE
        w.create_topic(unique_topic)
        r = w.init_until_ready("tv1-txn")
        assert r.error_code == NONE
        pid, epoch = r.producer_id, r.producer_epoch
        assert w.add_partitions("tv1-txn", pid, epoch, [(unique_topic, 0)]) == {
            (unique_topic, 0): NONE}
        batch = build_batch([(b"k", b"v")], producer_id=pid, producer_epoch=epoch,
                            base_sequence=0, transactional=True)
        assert w.produce(unique_topic, 0, batch, txn_id="tv1-txn")[0] == NONE
        assert w.end_txn("tv1-txn", pid, epoch, commit=True) == NONE
    broker.stop()

    data_dir = broker.data_dir
    values = _txn_state_values(data_dir)
    assert values and {v[:2] for v in values} == {b"\x00\x01"}
    segs = [str(p) for p in sorted(data_dir.glob("__transaction_state-*/*.log"))
            if p.stat().st_size]
    res = run_java_tool("org.apache.kafka.tools.DumpLogSegments",
                        ["--transaction-log-decoder", "--print-data-log", "--files", *segs])
    res.check()
    payloads = [line.split(" payload: ", 1)[1] for line in res.stdout.splitlines()
                if '"transactionalId":"tv1-txn"' in line]
    # Kafka's decoder reads every value as v1: Empty, Ongoing, PrepareCommit, CompleteCommit.
    assert len(payloads) == 4, res.describe()
    assert all(p.startswith('{"version":"1"') for p in payloads), res.describe()
    assert '"transactionStatus":4' in payloads[-1], res.describe()

    broker.start()
    with TxnWire(broker.bootstrap) as w:
        d = w.describe_txn("tv1-txn")
        assert (d.error_code, d.transaction_state, d.producer_id) == (NONE, "CompleteCommit", pid)


ADD_PARTITIONS = 24
TRANSACTION_ABORTABLE, INVALID_TXN_STATE, PRODUCER_FENCED = 120, 48, 90
INVALID_PRODUCER_ID_MAPPING, UNKNOWN_TOPIC_OR_PARTITION, OPERATION_NOT_ATTEMPTED = 49, 3, 55


def add_batched(w: TxnWire, version: int, txns: list[tuple[str, int, int, bool, list]]) -> dict:
    """AddPartitionsToTxn v4+: {(txn id, topic, partition): error} for a batch of
    (txn id, pid, epoch, verify_only, [(topic, partition)])."""
    body = {"transactions": [
        {"transactional_id": txn, "producer_id": pid, "producer_epoch": epoch,
         "verify_only": verify, "topics": [{"name": t, "partitions": [p]} for t, p in parts]}
        for txn, pid, epoch, verify, parts in txns]}
    r = w.call(ADD_PARTITIONS, version, body)
    assert r.error_code == NONE
    return {(res.transactional_id, t.name, p.partition_index): int(p.partition_error_code)
            for res in r.results_by_transaction for t in res.topic_results
            for p in t.results_by_partition}


def test_add_partitions_to_txn_batched_verify_and_add(broker, unique_topic):
    a, b = unique_topic + "-a", unique_topic + "-b"
    with TxnWire(broker.bootstrap) as w:
        w.create_topic(a)
        w.create_topic(b)
        r1, r2 = w.init_until_ready("apv-1"), w.init_until_ready("apv-2")
        p1, e1, p2, e2 = r1.producer_id, r1.producer_epoch, r2.producer_id, r2.producer_epoch
        # Nothing added yet: verification says abortable; one request carries two transactions,
        # one verifying and one adding.
        assert add_batched(w, 5, [("apv-1", p1, e1, True, [(a, 0)]),
                                  ("apv-2", p2, e2, False, [(a, 0), (b, 0)])]) == {
            ("apv-1", a, 0): TRANSACTION_ABORTABLE, ("apv-2", a, 0): NONE, ("apv-2", b, 0): NONE}
        assert w.describe_txn("apv-2").transaction_state == "Ongoing"
        # Verifying added nothing.
        assert add_batched(w, 5, [("apv-1", p1, e1, True, [(a, 0)])]) == {
            ("apv-1", a, 0): TRANSACTION_ABORTABLE}
        assert add_batched(w, 5, [("apv-1", p1, e1, False, [(a, 0)])]) == {("apv-1", a, 0): NONE}
        assert add_batched(w, 5, [("apv-1", p1, e1, True, [(a, 0), (b, 0)])]) == {
            ("apv-1", a, 0): NONE, ("apv-1", b, 0): TRANSACTION_ABORTABLE}
        # v4 predates TRANSACTION_ABORTABLE.
        assert add_batched(w, 4, [("apv-1", p1, e1, True, [(b, 0)])]) == {
            ("apv-1", b, 0): INVALID_TXN_STATE}
        # The transaction itself is wrong: every partition gets the one answer.
        assert add_batched(w, 5, [("apv-1", p1, e1 - 1 if e1 else e1 + 1, True, [(a, 0)]),
                                  ("apv-2", p1, e2, True, [(a, 0)])]) == {
            ("apv-1", a, 0): PRODUCER_FENCED, ("apv-2", a, 0): INVALID_PRODUCER_ID_MAPPING}
        assert add_batched(w, 5, [("apv-1", p1, e1, False, [(a, 0), (a, 99)])]) == {
            ("apv-1", a, 0): OPERATION_NOT_ATTEMPTED, ("apv-1", a, 99): UNKNOWN_TOPIC_OR_PARTITION}
        # The client form still answers as before.
        assert w.add_partitions("apv-1", p1, e1, [(b, 0)]) == {(b, 0): NONE}
        assert add_batched(w, 5, [("apv-1", p1, e1, True, [(b, 0)])]) == {("apv-1", b, 0): NONE}


# ---- transactions v2 (KIP-890 part 2): Produce v12, EndTxn v5, TxnOffsetCommit v5
NOT_ENOUGH_REPLICAS, INVALID_PRODUCER_EPOCH = 19, 47


def end_txn_v5(w: TxnWire, txn: str, pid: int, epoch: int, commit: bool) -> tuple[int, int, int]:
    """EndTxn v5 (retrying while the previous one completes): (error, producer id, epoch)."""
    deadline = time.monotonic() + 15
    while True:
        r = w.call(END_TXN, 5, {"transactional_id": txn, "producer_id": pid,
                                "producer_epoch": epoch, "committed": commit})
        if r.error_code != CONCURRENT_TRANSACTIONS or time.monotonic() > deadline:
            return int(r.error_code), r.producer_id, r.producer_epoch
        time.sleep(0.05)


def wait_completed(w: TxnWire, txn: str) -> None:
    """Until the coordinator has written the markers and Complete* of the last EndTxn."""
    deadline = time.monotonic() + 15
    while w.describe_txn(txn).transaction_state not in ("CompleteCommit", "CompleteAbort"):
        assert time.monotonic() < deadline, "the transaction never completed"
        time.sleep(0.05)


def produce_v12(w: TxnWire, txn: str, topic: str, batch: bytes) -> int:
    """Produce v12 with no AddPartitionsToTxn (retrying CONCURRENT_TRANSACTIONS, which the
    leader answers when the coordinator is still finishing the previous transaction after
    add.partitions.to.txn.retry.backoff.max.ms, and NOT_ENOUGH_REPLICAS)."""
    deadline = time.monotonic() + 15
    while True:
        code, _ = w.produce(topic, 0, batch, txn_id=txn, version=12)
        if (code not in (CONCURRENT_TRANSACTIONS, NOT_ENOUGH_REPLICAS)
                or time.monotonic() > deadline):
            return code
        time.sleep(0.05)


def test_tv2_produce_v12_end_txn_v5_bumps_the_epoch(broker, unique_topic):
    txn, topic = "tv2-wire", unique_topic
    with TxnWire(broker.bootstrap) as w:
        # at least TV2's: Produce v13, EndTxn v5, TxnOffsetCommit v5 (v6, Kafka 4.4's, too now)
        served = {k.api_key: k.max_version for k in api_versions(w).api_keys}
        assert served[0] >= 13 and served[26] >= 5 and served[28] >= 5
        w.create_topic(topic)
        r = w.init_until_ready(txn)
        pid, e = r.producer_id, r.producer_epoch
        # The leader adds the partition itself: no AddPartitionsToTxn.
        assert produce_v12(w, txn, topic, txn_batch(pid, e, 0, [b"a", b"b"])) == NONE
        d = w.describe_txn(txn)
        assert (d.transaction_state, [(t.topic, tuple(t.partitions)) for t in d.topics]) == (
            "Ongoing", [(topic, (0,))])
        assert end_txn_v5(w, txn, pid, e, commit=True) == (NONE, pid, e + 1)
        # A retry with the old epoch is answered with the bumped one.
        assert end_txn_v5(w, txn, pid, e, commit=True) == (NONE, pid, e + 1)
        # The next transaction: epoch + 1, sequences from 0; then an abort.
        assert produce_v12(w, txn, topic, txn_batch(pid, e + 1, 0, [b"x"])) == NONE
        assert end_txn_v5(w, txn, pid, e + 1, commit=False) == (NONE, pid, e + 2)
        assert end_txn_v5(w, txn, pid, e + 1, commit=False) == (NONE, pid, e + 2)
        assert end_txn_v5(w, txn, pid, e + 1, commit=True)[0] == INVALID_TXN_STATE
        # Abort with the current epoch and nothing open: the epoch is bumped all the same.
        assert end_txn_v5(w, txn, pid, e + 2, commit=False) == (NONE, pid, e + 3)
        assert end_txn_v5(w, txn, pid, e + 3, commit=True)[0] == INVALID_TXN_STATE
        # Older epochs are fenced, at the coordinator and at the partition.
        assert end_txn_v5(w, txn, pid, e, commit=True)[0] == PRODUCER_FENCED
        assert produce_v12(w, txn, topic, txn_batch(pid, e + 2, 0, [b"z"])) == (
            INVALID_PRODUCER_EPOCH)
        wait_completed(w, txn)
        part = w.fetch(topic, 0, 0, isolation=1)
        # Markers carry the bumped epochs; read_committed sees the committed batch only.
        assert markers(part.records) == [(pid, e + 1, True), (pid, e + 2, False)]
        assert committed_values(part) == [b"a", b"b"]


def _requests_seen(port: int) -> dict[tuple[str, int], float]:
    """(API name, version) -> requests received, from the broker's Prometheus endpoint."""
    import re
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    pat = re.compile(r'^kafka_network_requestmetrics_requestspersec_total'
                     r'\{request="(\w+)",version="(\d+)"\} (\S+)$', re.M)
    return {(m[1], int(m[2])): float(m[3]) for m in pat.finditer(text)}


def _versions(before: dict[tuple[str, int], float], after: dict[tuple[str, int], float],
              api: str) -> set[int]:
    """The versions of `api` received between the two scrapes."""
    return {v for (name, v), n in after.items() if name == api and n > before.get((name, v), 0)}


def test_java_4_producer_uses_tv2(broker_factory, unique_topic):
    """Kafka 4.x's transactional producer on a new cluster (transaction.version 2 finalized):
    no AddPartitionsToTxn/AddOffsetsToTxn, EndTxn v5 bumps the epoch each time; the broker's
    request metrics show Produce v12+ and EndTxn v5. Then, on the same cluster, kafka-clients
    3.9 runs the same program with transactions v1: AddPartitionsToTxn/AddOffsetsToTxn, EndTxn
    below v5, no epoch bump."""
    from confluent_kafka import Consumer, TopicPartition

    from tests.support.broker import free_port
    from tests.support.java import JAVA_SRC, compile_java, run_java_tool
    from tests.transactions.clients import consume_all

    port = free_port()
    broker = broker_factory({"metrics.port": port})
    topic, group, txn = unique_topic, unique_topic + "-g", "tv2-java"
    with TxnWire(broker.bootstrap) as w:
        w.create_topic(topic)
        w.create_topic(topic + "-tv1")
    seen0 = _requests_seen(port)
    classes = compile_java([JAVA_SRC / "Tv2Transactions.java"], classpath="kafka4")
    res = run_java_tool("Tv2Transactions", [broker.bootstrap, topic, group, txn, "6"],
                        extra_classpath=[classes], timeout=120)
    assert res.returncode == 0 and "DONE" in res.stdout, res.describe()
    seen1 = _requests_seen(port)
    assert max(_versions(seen0, seen1, "Produce")) >= 12
    assert _versions(seen0, seen1, "EndTxn") == {5}
    assert _versions(seen0, seen1, "TxnOffsetCommit") == {5}
    assert _versions(seen0, seen1, "AddOffsetsToTxn") == set()
    # Versions 0-3 are the client's; 4+ the brokers' verification requests.
    assert {v for v in _versions(seen0, seen1, "AddPartitionsToTxn") if v <= 3} == set()
    assert consume_all(broker.bootstrap, topic, "read_committed", expect=4) == [
        b"v0", b"v1", b"v3", b"v4"]
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        assert c.committed([TopicPartition(topic, 0)], timeout=10)[0].offset == 5
    finally:
        c.close()
    with TxnWire(broker.bootstrap) as w:
        d = w.describe_txn(txn)
        part = w.fetch(topic, 0, 0, isolation=1)
    # Six EndTxn v5, six epoch bumps; each marker carries its transaction's bumped epoch.
    assert (d.transaction_state, d.producer_epoch) == ("CompleteAbort", 6)
    assert [(e, commit) for _, e, commit in markers(part.records)] == [
        (1, True), (2, True), (3, False), (4, True), (5, True), (6, False)]

    # kafka-clients 3.9 on the same (TV2-finalized) cluster speaks transactions v1.
    classes39 = compile_java([JAVA_SRC / "Tv2Transactions.java"], classpath="clients39")
    res = run_java_tool("Tv2Transactions", [broker.bootstrap, topic + "-tv1", group + "-tv1",
                                            txn + "-tv1", "3"],
                        classpath="clients39", extra_classpath=[classes39], timeout=120)
    assert res.returncode == 0 and "DONE" in res.stdout, res.describe()
    seen2 = _requests_seen(port)
    assert max(_versions(seen1, seen2, "Produce")) < 12
    assert _versions(seen1, seen2, "EndTxn")
    assert max(_versions(seen1, seen2, "EndTxn")) < 5
    assert {v for v in _versions(seen1, seen2, "AddPartitionsToTxn") if v <= 3}
    assert _versions(seen1, seen2, "AddOffsetsToTxn")
    with TxnWire(broker.bootstrap) as w:
        d = w.describe_txn(txn + "-tv1")
        part = w.fetch(topic + "-tv1", 0, 0, isolation=1)
    assert (d.transaction_state, d.producer_epoch) == ("CompleteAbort", 0)
    assert [(e, commit) for _, e, commit in markers(part.records)] == [
        (0, True), (0, True), (0, False)]
    assert committed_values(part) == [b"v0", b"v1"]


def test_tv2_timed_out_transaction_fences_its_producer(broker_factory, unique_topic):
    """The coordinator aborts a timed-out TV2 transaction with the epoch fenced and bumped
    again: the producer's late EndTxn v5 is fenced, not taken for a retry of that abort."""
    broker = broker_factory(
        {"transaction.abort.timed.out.transaction.cleanup.interval.ms": 200})
    txn, topic = "tv2-timeout", unique_topic
    with TxnWire(broker.bootstrap) as w:
        w.create_topic(topic)
        r = w.init_until_ready(txn, timeout_ms=1000)
        pid, e = r.producer_id, r.producer_epoch
        assert produce_v12(w, txn, topic, txn_batch(pid, e, 0, [b"late"])) == NONE
        deadline = time.monotonic() + 20
        while w.describe_txn(txn).transaction_state != "CompleteAbort":
            assert time.monotonic() < deadline, "the timed-out transaction was not aborted"
            time.sleep(0.1)
        assert w.describe_txn(txn).producer_epoch == e + 2
        for commit in (False, True):
            assert end_txn_v5(w, txn, pid, e, commit)[0] == PRODUCER_FENCED
        part = w.fetch(topic, 0, 0, isolation=1)
        assert markers(part.records) == [(pid, e + 2, False)]
        assert committed_values(part) == []


def test_tv2_producer_state_survives_restart(broker, unique_topic):
    """After a kill -9 the partition rebuilds the producer's bumped epoch from the marker (and
    the coordinator the TV2 state from its log): the next transaction starts at epoch + 1,
    sequence 0, and an EndTxn v5 retry with the old epoch still gets the bumped one."""
    txn, topic = "tv2-restart", unique_topic
    with TxnWire(broker.bootstrap) as w:
        w.create_topic(topic)
        r = w.init_until_ready(txn)
        pid, e = r.producer_id, r.producer_epoch
        assert produce_v12(w, txn, topic, txn_batch(pid, e, 0, [b"a", b"b"])) == NONE
        assert end_txn_v5(w, txn, pid, e, commit=True) == (NONE, pid, e + 1)
        wait_completed(w, txn)
    broker.kill9()
    broker.start()
    with TxnWire(broker.bootstrap) as w:
        deadline = time.monotonic() + 15
        while (res := end_txn_v5(w, txn, pid, e, commit=True))[0] in (14, 15, 16):
            assert time.monotonic() < deadline, res  # the coordinator loading
            time.sleep(0.1)
        assert res == (NONE, pid, e + 1)
        assert produce_v12(w, txn, topic, txn_batch(pid, e + 1, 0, [b"c"])) == NONE
        assert produce_v12(w, txn, topic, txn_batch(pid, e, 2, [b"z"])) == INVALID_PRODUCER_EPOCH
        assert end_txn_v5(w, txn, pid, e + 1, commit=True) == (NONE, pid, e + 2)
        wait_completed(w, txn)
        assert committed_values(w.fetch(topic, 0, 0, isolation=1)) == [b"a", b"b", b"c"]


def test_tv2_exhausted_epoch_continues_as_a_new_producer_id(broker, unique_topic):
    """EndTxn v5 bumps the epoch at every transaction: at Kafka's limit (32766, one short of
    Short.MAX_VALUE) the next EndTxn answers a new producer id at epoch 0, the markers of the
    old id carry the last epoch, a retry with the exhausted epoch gets the same answer, and
    the new id goes on."""
    txn, topic = "tv2-exhausted", unique_topic
    with TxnWire(broker.bootstrap) as w:
        w.create_topic(topic)
        r = w.init_until_ready(txn)
        pid, epoch = r.producer_id, r.producer_epoch
        while epoch < 32765:  # empty aborts: one epoch each (~0.5 ms a round trip)
            code, pid2, epoch = end_txn_v5(w, txn, pid, epoch, False)
            assert (code, pid2) == (NONE, pid), (code, epoch)
        assert produce_v12(w, txn, topic, txn_batch(pid, epoch, 0, [b"a"])) == NONE
        assert end_txn_v5(w, txn, pid, 32765, True) == (NONE, pid, 32766)
        wait_completed(w, txn)
        assert produce_v12(w, txn, topic, txn_batch(pid, 32766, 0, [b"b"])) == NONE
        code, new_pid, new_epoch = end_txn_v5(w, txn, pid, 32766, True)
        assert (code, new_epoch) == (NONE, 0) and new_pid != pid
        wait_completed(w, txn)
        # a retry of that EndTxn (its answer lost) is recognised, not fenced
        assert end_txn_v5(w, txn, pid, 32766, True) == (NONE, new_pid, 0)
        assert produce_v12(w, txn, topic, txn_batch(new_pid, 0, 0, [b"c"])) == NONE
        assert end_txn_v5(w, txn, new_pid, 0, True) == (NONE, new_pid, 1)
        wait_completed(w, txn)
        d = w.describe_txn(txn)
        assert (d.producer_id, d.producer_epoch) == (new_pid, 1)
        part = w.fetch(topic, 0, 0, isolation=1)
    assert markers(part.records) == [(pid, 32766, True), (pid, 32767, True),
                                     (new_pid, 1, True)]
    assert committed_values(part) == [b"a", b"b", b"c"]


def test_write_txn_markers_v2_refuses_a_late_marker_of_an_earlier_transaction(broker,
                                                                               unique_topic):
    """WriteTxnMarkers v2 carries the transaction's version. At 2 a transaction ends with its
    epoch bumped, so a marker at the epoch of the producer's open transaction is a late one
    of the transaction before: refused (INVALID_PRODUCER_EPOCH), where transaction version 1
    takes it; at the same epoch with nothing open it is a retry, accepted (Kafka 4.2+)."""
    topic = unique_topic

    def marker(w: TxnWire, pid: int, epoch: int, tv: int) -> int:
        r = w.call(27, 2, {"markers": [{
            "producer_id": pid, "producer_epoch": epoch, "transaction_result": True,
            "topics": [{"name": topic, "partition_indexes": [0]}], "coordinator_epoch": 0,
            "transaction_version": tv}]})
        return int(r.markers[0].topics[0].partitions[0].error_code)

    with TxnWire(broker.bootstrap) as w:
        w.create_topic(topic)
        opened = []
        for txn, value in (("wtm-a", b"a"), ("wtm-b", b"b")):
            r = w.init_until_ready(txn)
            pid, e = r.producer_id, r.producer_epoch
            assert produce_v12(w, txn, topic, txn_batch(pid, e, 0, [value])) == NONE
            opened.append((pid, e))
        (pa, ea), (pb, eb) = opened
        assert marker(w, pa, ea, 2) == INVALID_PRODUCER_EPOCH
        assert marker(w, pb, eb, 1) == NONE
        assert marker(w, pa, ea + 1, 2) == NONE
        assert marker(w, pa, ea + 1, 2) == NONE  # a retry: nothing open at that epoch
        part = w.fetch(topic, 0, 0, isolation=1)
    assert markers(part.records) == [(pb, eb, True), (pa, ea + 1, True), (pa, ea + 1, True)]
    assert sorted(committed_values(part)) == [b"a", b"b"]
