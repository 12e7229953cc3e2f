"""Carrying a single broker's data directory over to a node, step by step (broker/node/
layout.py), on the directory a real `samsa serve` left: a start interrupted while the metadata
is written or while entries are moved resumes and ends with everything in broker-0; what
cannot be carried (another broker id's partitions, a node started there before, a broker
still listening on the node's port or holding the dir's lock, a metadata file from a run
without ZooKeeper on a node with it) is refused before anything moves; one process over a
node's directory is refused, a single broker's own is not."""

from __future__ import annotations

import json
import os
import shutil
import socket
import sqlite3
from pathlib import Path

import pytest

from samsa.broker.cluster.shared import NODE_FILE
from samsa.broker.cluster.shared.adopt import carry_into_shared, shared_cluster_id
from samsa.broker.node.layout import (
    MARKER,
    MIGRATED,
    LayoutError,
    adopt_single_broker,
    check_not_a_node,
    single_broker_entries,
    warn_unstarted,
)
from samsa.config.loader import load_config
from samsa.config.schema import BrokerConfig
from samsa.storage.log_dir_lock import LogDirLock
from samsa.testing import SamsaBroker, create_topic, free_port

pytestmark = pytest.mark.timeout(120)


def _single(data: Path, topics: list[tuple[str, int]]) -> Path:
    """The data directory a single broker 0 with `topics` left."""
    b = SamsaBroker({"offsets.topic.num.partitions": 2}, data_dir=data, name="single")
    b.start()
    try:
        for name, partitions in topics:
            create_topic(b.bootstrap, name, partitions=partitions)
    finally:
        b.close()
    return data


@pytest.fixture(scope="module")
def single_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A single broker's directory with topic `orders`; another's also with topic `broker`,
    whose partition directories are named as a node's process directories."""
    return {"orders": _single(tmp_path_factory.mktemp("s") / "data", [("orders", 3)]),
            "broker": _single(tmp_path_factory.mktemp("s") / "data",
                              [("orders", 3), ("broker", 2)])}


@pytest.fixture
def data(single_dirs: dict[str, Path], tmp_path: Path) -> Path:
    """A copy of the first: each test changes it."""
    d = tmp_path / "data"
    shutil.copytree(single_dirs["orders"], d)
    return d


def _node(data: Path, **settings: str) -> BrokerConfig:
    return load_config(None, {"log.dirs": str(data), "node.id": "0",
                              "listeners": f"PLAINTEXT://127.0.0.1:{free_port()}", **settings})


def _tree(d: Path) -> list[str]:
    """Every path under `d` but SQLite's own beside a file it read (-wal, -shm)."""
    return sorted(str(p.relative_to(d)) for p in d.rglob("*")
                  if not p.name.endswith(("-wal", "-shm")))


def _shared_topics(path: Path) -> set[str]:
    db = sqlite3.connect(path)
    try:
        return {r[0] for r in db.execute(
            "SELECT substr(path, 17) FROM znodes WHERE parent = '/brokers/topics'")}
    finally:
        db.close()


def _assert_carried(data: Path, cluster_id: str) -> None:
    assert single_broker_entries(data) == []
    assert not (data / MARKER).exists() and not (data / "samsa-metadata.json").exists()
    assert sorted(p.name for p in (data / "broker-0").glob("orders-*")) == [
        "orders-0", "orders-1", "orders-2"]
    assert (data / "broker-0" / MIGRATED).exists()
    assert shared_cluster_id(data / NODE_FILE) == cluster_id
    assert _shared_topics(data / NODE_FILE) == {"orders"}


def test_moves_interrupted_midway_resume(data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cluster_id = json.loads((data / "samsa-metadata.json").read_text())["cluster_id"]
    rename, done = os.rename, []

    def crash_after_three(src: str, dst: str) -> None:
        if len(done) == 3:
            raise OSError("the host went down")
        done.append(src)
        rename(src, dst)

    monkeypatch.setattr(os, "rename", crash_after_three)
    with pytest.raises(OSError, match="went down"):
        adopt_single_broker(_node(data))
    monkeypatch.undo()
    assert (data / MARKER).exists() and (data / "samsa-metadata.json").exists()
    assert len(list((data / "broker-0").iterdir())) == 3
    adopt_single_broker(_node(data))
    _assert_carried(data, cluster_id)
    before = _tree(data)
    adopt_single_broker(_node(data))  # a node's directory now: nothing to do
    assert _tree(data) == before


def test_a_carry_interrupted_before_its_file_was_complete_starts_again(
        data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cluster_id = json.loads((data / "samsa-metadata.json").read_text())["cluster_id"]

    def crash(src: object, dst: object) -> None:
        raise OSError("the host went down")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="went down"):
        adopt_single_broker(_node(data))
    monkeypatch.undo()
    assert not (data / NODE_FILE).exists() and not (data / "broker-0").exists()
    adopt_single_broker(_node(data))
    _assert_carried(data, cluster_id)


def test_another_broker_id_is_refused_before_anything_moves(data: Path) -> None:
    before = _tree(data)
    with pytest.raises(LayoutError, match="--broker-id 0"):
        adopt_single_broker(_node(data, **{"node.id": "3"}))
    assert _tree(data) == before


def test_a_node_started_beside_the_single_broker_s_data_is_refused(data: Path,
                                                                   tmp_path: Path) -> None:
    other = tmp_path / "other"
    shutil.copytree(data, other)
    doc = json.loads((other / "samsa-metadata.json").read_text())
    doc["cluster_id"] = "another-cluster-id-000"
    (other / "samsa-metadata.json").write_text(json.dumps(doc))
    carry_into_shared(other, data / NODE_FILE, 0)  # another cluster's node file
    before = _tree(data)
    with pytest.raises(LayoutError, match="a node was started there before"):
        adopt_single_broker(_node(data))
    assert _tree(data) == before


def test_a_broker_still_listening_on_the_node_s_port_is_refused(data: Path) -> None:
    before = _tree(data)
    with socket.socket() as running:  # the single broker, not stopped yet
        running.bind(("127.0.0.1", 0))
        running.listen()
        port = running.getsockname()[1]
        with pytest.raises(LayoutError, match="is in use"):
            adopt_single_broker(_node(data, listeners=f"PLAINTEXT://127.0.0.1:{port}"))
    assert _tree(data) == before


def test_a_broker_still_holding_the_log_dir_lock_is_refused(data: Path) -> None:
    """On any port: the lock, not the port, says a single broker still runs on the dir."""
    before = _tree(data)
    held = LogDirLock.acquire(data)  # the single broker, not stopped yet
    try:
        with pytest.raises(LayoutError, match="Failed to acquire lock on file .lock"):
            adopt_single_broker(_node(data))
    finally:
        held.release()
    assert _tree(data) == before
    adopt_single_broker(_node(data))  # once it stopped, the carry goes ahead
    assert (data / "broker-0" / "orders-0").is_dir()


def test_a_file_from_a_run_without_zookeeper_on_a_node_with_it_is_refused(data: Path) -> None:
    before = _tree(data)
    with pytest.raises(LayoutError, match="without --zookeeper"):
        adopt_single_broker(_node(data, **{"zookeeper.connect": "127.0.0.1:1"}))
    assert _tree(data) == before


def test_a_topic_named_broker_cannot_be_carried(single_dirs: dict[str, Path],
                                                tmp_path: Path) -> None:
    data = tmp_path / "data"
    shutil.copytree(single_dirs["broker"], data)
    before = _tree(data)
    with pytest.raises(LayoutError, match="topic 'broker'"):
        adopt_single_broker(_node(data))
    assert _tree(data) == before
    check_not_a_node(_node(data))  # its partition directories are not a node's


def test_one_process_over_a_node_s_directory_is_refused(data: Path) -> None:
    check_not_a_node(_node(data))  # a single broker's own
    adopt_single_broker(_node(data))
    with pytest.raises(LayoutError, match="--processes N"):
        check_not_a_node(_node(data))
    with pytest.raises(LayoutError, match="broker-0"):  # with ZooKeeper: the process dirs
        check_not_a_node(_node(data, **{"zookeeper.connect": "127.0.0.1:1"}))


def test_a_node_started_with_fewer_processes_names_the_brokers_it_leaves_out(
        data: Path, caplog: pytest.LogCaptureFixture) -> None:
    adopt_single_broker(_node(data))
    (data / "broker-3").mkdir()  # a process that never wrote anything: nothing to lose
    shutil.copytree(data / "broker-0" / "orders-0", data / "broker-2" / "orders-0")
    with caplog.at_level("WARNING", logger="samsa.node"):
        warn_unstarted(_node(data), 2)
    assert [r.getMessage().split(" holds ")[0] for r in caplog.records] == [
        str(data / "broker-2")]
