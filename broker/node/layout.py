"""A data directory carried between one broker and a node of several processes.

`samsa serve --data-dir D` keeps its partitions, checkpoints and (without ZooKeeper) its
metadata file directly in D; `samsa serve --data-dir D --processes N` gives process i the log
directory D/broker-<B+i> and, without ZooKeeper, the node's shared file. Before a node starts,
`adopt_single_broker` finds a single broker's entries in each of log.dirs and makes them broker
B's (process 0's), as they were:

1. without ZooKeeper, the single broker's metadata is written into the node's shared file
   (broker/cluster/shared/adopt.py: the file appears complete or not at all, and keeps the
   single broker's cluster id, by which an interrupted start knows it was written); with
   ZooKeeper it is there already;
2. a marker file (MARKER) says the moves are under way;
3. each entry is renamed into DIR/broker-B (one rename, on the same file system), the metadata
   file last, as samsa-metadata.json.migrated;
4. the marker is removed.

A start interrupted anywhere resumes at the step it stopped in: what was renamed is no longer in
DIR. What cannot be carried is refused with a message, before anything moved: a node already
started on D beside the single broker's data, or a single broker whose partitions are another
broker id's. The reverse, `samsa serve` as one process over a node's directory, is refused
(`check_not_a_node`): the other processes' partitions have no place in one broker.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

from samsa.config.schema import BrokerConfig
from samsa.storage.log_dir_lock import LogDirLock, LogDirLockError

from ..cluster.local_cluster import port_is_free
from ..cluster.metadata_store import LocalMetadataStore
from ..cluster.shared import NODE_FILE
from ..cluster.shared.adopt import (
    PRODUCER_ID_FILE,
    carry_into_shared,
    fsync_path,
    read_local,
    shared_cluster_id,
)

log = logging.getLogger("samsa.node")

MARKER = ".samsa-node-adopting"  # in the first log dir while entries are being moved
MIGRATED = LocalMetadataStore.FILE + ".migrated"
# A broker's own files in a log directory, beside its partition directories.
BROKER_FILES = frozenset({
    ".kafka_cleanshutdown", "recovery-point-offset-checkpoint", "replication-offset-checkpoint",
    "log-start-offset-checkpoint", "cleaner-offset-checkpoint", PRODUCER_ID_FILE,
})
_PROCESS_DIR = re.compile(r"broker-(\d+)")


class LayoutError(Exception):
    """The data directory cannot be used as asked; the message says why and what to do."""


def _partition_dir(path: Path) -> bool:
    """A partition's directory (a topic named `broker` has broker-0, broker-1, ...)."""
    return (path / "partition.metadata").exists() or any(path.glob("*.log"))


def process_dirs(log_dir: Path) -> dict[int, Path]:
    """The log directories of a node's processes in `log_dir`, by broker id."""
    if not log_dir.is_dir():
        return {}
    out = {}
    for entry in log_dir.iterdir():
        m = _PROCESS_DIR.fullmatch(entry.name)
        if m and entry.is_dir() and not _partition_dir(entry):
            out[int(m.group(1))] = entry
    return out


def single_broker_entries(log_dir: Path) -> list[Path]:
    """A single broker's entries in `log_dir`: its partition (and other) directories and its
    own files, not the node's (process dirs, the shared file) nor files it does not know."""
    if not log_dir.is_dir():
        return []
    nodes = set(process_dirs(log_dir).values())
    return sorted(e for e in log_dir.iterdir()
                  if (e.is_dir() and e not in nodes) or e.name in BROKER_FILES)


def adopt_single_broker(node: BrokerConfig) -> None:
    """Make a single broker's data in the node's log dirs broker B's (the module's steps);
    LayoutError when it cannot be."""
    dirs = node.log_dirs
    first = dirs[0]
    entries = {d: single_broker_entries(d) for d in dirs}
    metadata = first / LocalMetadataStore.FILE
    marker = first / MARKER
    if not marker.exists() and not metadata.exists() and not any(entries.values()):
        return  # a node's directories already, or new ones
    locks = _lock_for_the_carry(dirs)
    try:
        _carry(node, entries, metadata, marker)
    finally:
        for held in locks:
            held.release()


def _lock_for_the_carry(dirs: list[Path]) -> list[LogDirLock]:
    """The single broker's own log dir locks, held while its entries move: a broker still
    running on them (on any port) holds them."""
    locks: list[LogDirLock] = []
    try:
        for d in dirs:
            locks.append(LogDirLock.acquire(d))
    except LogDirLockError as e:
        for held in locks:
            held.release()
        raise LayoutError(f"{e}: stop the broker that still runs there before starting the "
                          "node") from None
    return locks


def _carry(node: BrokerConfig, entries: dict[Path, list[Path]], metadata: Path,
           marker: Path) -> None:
    broker_id = node.broker_id
    dirs = node.log_dirs
    first = dirs[0]
    zookeeper = node["zookeeper.connect"]
    if not marker.exists():
        _check_can_adopt(node, entries, metadata)
    if metadata.exists() and not zookeeper:
        _carry_metadata(node, metadata)
    marker.write_text(f"{broker_id}\n")
    fsync_path(first)
    for d in [*dirs[1:], first]:  # the first dir last: it holds the metadata file
        target = d / f"broker-{broker_id}"
        target.mkdir(exist_ok=True)
        moving = single_broker_entries(d)  # again: a resumed start finds fewer
        if d == first and metadata.exists():
            moving.append(metadata)
        for entry in moving:
            to = target / (MIGRATED if entry == metadata else entry.name)
            if to.exists():
                raise LayoutError(f"cannot move {entry} into {target}: {to} exists")
            os.rename(entry, to)
        fsync_path(target)
        fsync_path(d)
        if moving:
            log.info("moved the single broker's %d entries of %s into %s (broker %d, "
                     "process 0 of the node)", len(moving), d, target, broker_id)
    marker.unlink()
    fsync_path(first)


def _check_can_adopt(node: BrokerConfig, entries: dict[Path, list[Path]],
                     metadata: Path) -> None:
    """Refuse what cannot be carried, before anything changes."""
    broker_id = node.broker_id
    zookeeper = node["zookeeper.connect"]
    busy = [f"{li.host}:{li.port}" for li in node.listeners
            if li.port and ":" not in li.host and not port_is_free(li.host, li.port)]
    if busy:  # the node could not listen there; a broker may still run (it has the lock too)
        raise LayoutError(
            f"{', '.join(busy)}, where broker {broker_id} of the node listens, is in use: stop "
            f"the broker that still runs on {node.data_dir} before starting the node there")
    if metadata.exists() and zookeeper:
        raise LayoutError(
            f"{metadata.parent} holds a single broker's metadata file ({metadata.name}) from a "
            "run without ZooKeeper, but this node uses ZooKeeper, where that metadata is not: "
            "start the node without --zookeeper to carry it over")
    if not metadata.exists() and not zookeeper:
        listed = ", ".join(e.name for es in entries.values() for e in es[:5])
        raise LayoutError(
            f"{node.data_dir} holds a single broker's log entries ({listed}...) but no "
            f"metadata file ({metadata.name}) to carry over with them")
    if metadata.exists():
        others = _replica_ids(node, metadata) - {broker_id}
        if others:
            raise LayoutError(
                f"the single broker's partitions in {metadata.parent} are broker "
                f"{', '.join(map(str, sorted(others)))}'s: start the node with --broker-id "
                f"{min(others)} so that they are its process 0's")
    for d in node.log_dirs:
        target = d / f"broker-{broker_id}"
        if target.is_dir() and _partition_dir(target):
            raise LayoutError(
                f"{target} is a partition of the single broker's topic 'broker', named as "
                f"the node names broker {broker_id}'s log directory: this directory cannot "
                "be carried over; keep running it as one process")
        if entries[d] and target.exists() and any(target.iterdir()):
            raise LayoutError(
                f"{d} holds a single broker's data and {target} a node process's: a node was "
                "started there before; move one of them away")


def _replica_ids(node: BrokerConfig, metadata: Path) -> set[int]:
    store = read_local(metadata.parent, node.broker_id)
    return {r for t in store.topics().values() for s in t.partitions.values()
            for r in s.replicas}


def _carry_metadata(node: BrokerConfig, metadata: Path) -> None:
    """The single broker's metadata into the node's shared file, unless it is there."""
    shared = Path(node["samsa.metadata.shared.file"] or node.data_dir / NODE_FILE)
    cluster_id = read_local(metadata.parent, node.broker_id).cluster_id
    if shared.exists():
        if shared_cluster_id(shared) != cluster_id:
            raise LayoutError(
                f"{metadata.parent} holds a single broker's metadata ({metadata.name}) and a "
                f"node's ({shared}) of another cluster: a node was started there before; move "
                "one of them away")
        log.info("%s already holds the single broker's metadata (cluster %s)", shared,
                 cluster_id)
        return
    log.info("carrying the single broker's metadata from %s into %s (through a session "
             "of its own, registered as broker %d until it is done)", metadata, shared,
             node.broker_id)
    carried = carry_into_shared(metadata.parent, shared, node.broker_id)
    log.info("carried the single broker's metadata from %s into %s: %s", metadata, shared,
             carried)


def check_not_a_node(config: BrokerConfig) -> None:
    """`samsa serve` as one process: refuse a node's directory (LayoutError)."""
    if config["samsa.metadata.shared.file"]:
        return  # a process of a node, or brokers sharing a file on purpose
    for d in config.log_dirs:
        found = [p.name for _, p in sorted(process_dirs(d).items())]
        if (d / NODE_FILE).exists() and not config["zookeeper.connect"]:
            found.append(NODE_FILE)
        if found:
            raise LayoutError(
                f"{d} is the data directory of a node of several processes "
                f"({', '.join(found)}): run it with `samsa serve --processes N`, N the number "
                "of its processes, as before; one broker cannot hold the partitions the other "
                "processes led")


def warn_unstarted(node: BrokerConfig, count: int) -> None:
    """Log the process dirs in log.dirs of brokers this node does not start."""
    ids = range(node.broker_id, node.broker_id + count)
    for d in node.log_dirs:
        for broker_id, path in sorted(process_dirs(d).items()):
            if broker_id not in ids and any(path.iterdir()):
                log.warning("%s holds broker %d's data, which this node of %d processes does "
                            "not start: its partitions stay offline until it runs", path,
                            broker_id, count)

