"""A single broker's metadata carried into a node's shared file: what `samsa serve --data-dir D`
kept in D/samsa-metadata.json (LocalMetadataStore: the cluster id, topics with their ids,
assignments and leader epochs, topic, group, client-metrics and broker configs, client quotas,
SCRAM users, ACLs, delegation tokens, finalized features) and its producer-id block, written
through the shared store's own parts into a new file that is renamed into place once complete:
the node's file either holds all of it or does not exist. The carried file keeps the single
broker's cluster id, which is how a start interrupted after the rename knows it is done
(broker/node/layout.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from ..metadata_store import BrokerInfo, LocalMetadataStore, QuotaEntity
from ..zk.common import dumps
from ..zk.producer_ids import PRODUCER_ID_BLOCK
from .store import SharedMetadataStore

log = logging.getLogger("samsa.node")

# The single broker's producer-id state beside its metadata (coordinator/producer_ids.py).
PRODUCER_ID_FILE = "producer-id-block"


@dataclass
class Carried:
    """What was carried, for the log."""

    cluster_id: str
    topics: int = 0
    partitions: int = 0
    acls: int = 0
    scram_users: int = 0
    tokens: int = 0
    configs: int = 0  # broker, group, client-metrics and quota entities
    next_producer_id: int = 0

    def __str__(self) -> str:
        return (f"cluster {self.cluster_id}: {self.topics} topics ({self.partitions} "
                f"partitions), {self.acls} ACLs, {self.scram_users} SCRAM users, {self.tokens} "
                f"delegation tokens, {self.configs} config entities, producer ids from "
                f"{self.next_producer_id}")


def read_local(data_dir: Path, broker_id: int) -> LocalMetadataStore:
    """The single broker's store, read from its file (which must exist: the store writes a
    new one otherwise)."""
    if not (data_dir / LocalMetadataStore.FILE).is_file():
        raise FileNotFoundError(data_dir / LocalMetadataStore.FILE)
    return LocalMetadataStore(data_dir, BrokerInfo(broker_id, "127.0.0.1", 0))


def shared_cluster_id(path: Path) -> str | None:
    """The cluster id a shared file holds (None: none yet), read without a session."""
    db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        row = db.execute("SELECT data FROM znodes WHERE path = '/cluster/id'").fetchone()
    except sqlite3.OperationalError:  # no tables: a file no process has started on
        return None
    finally:
        db.close()
    return str(json.loads(row[0])["id"]) if row else None


def carry_into_shared(data_dir: Path, shared: Path, broker_id: int) -> Carried:
    """Write the single broker's metadata (in `data_dir`) as the new shared file `shared`,
    which must not exist."""
    local = read_local(data_dir, broker_id)
    carried = Carried(local.cluster_id, next_producer_id=_next_producer_id(data_dir))
    building = shared.with_name(shared.name + ".carrying")
    for leftover in (building, *_sqlite_sidecars(building)):  # an interrupted attempt's
        leftover.unlink(missing_ok=True)
    asyncio.run(_copy(local, building, broker_id, carried))
    if _sqlite_sidecars(building)[0].exists():  # the last close checkpoints into the file
        raise RuntimeError(f"{building}: its write-ahead log was left behind")
    fsync_path(building)
    os.replace(building, shared)
    fsync_path(shared.parent)
    return carried


async def _copy(local: LocalMetadataStore, path: Path, broker_id: int,
                carried: Carried) -> None:
    store = SharedMetadataStore(path, BrokerInfo(broker_id, "127.0.0.1", 0))
    await store.start()  # registers this broker for the copy's duration: gone on close
    try:
        zk = store.session.zk
        cluster = dumps({"version": "1", "id": local.cluster_id})
        await asyncio.to_thread(zk.set, "/cluster/id", cluster)
        levels = dict(local.finalized_features().levels)
        await store.update_features(lambda _current: levels)
        for topic in local.topics().values():
            await store.create_topic(topic)
            carried.topics += 1
            carried.partitions += len(topic.partitions)
        bindings = list(local.acls().bindings())
        refused = await store.create_acls(bindings) if bindings else []
        for binding, why in zip(bindings, refused, strict=True):
            if why is not None:  # a name ZooKeeper's layout cannot hold ('/')
                log.warning("ACL %s not carried: %s", binding, why)
        carried.acls = sum(1 for why in refused if why is None)
        users = local.scram_users()
        await store.alter_scram_credentials([
            (user, mech, local.scram_credential(user, mech))
            for user, mechs in users.items() for mech in mechs])
        carried.scram_users = len(users)
        for info in local.delegation_tokens.tokens().values():
            await store.delegation_tokens.put_token(info)
            carried.tokens += 1
        await _copy_configs(local, store, carried)
        if carried.next_producer_id:
            block = {"version": 1, "broker": broker_id, "block_start": "0",
                     "block_end": str(carried.next_producer_id - 1)}
            await asyncio.to_thread(zk.create, PRODUCER_ID_BLOCK, dumps(block))
    finally:
        await store.close()


async def _copy_configs(local: LocalMetadataStore, store: SharedMetadataStore,
                        carried: Carried) -> None:
    for entity, config in local.broker_configs().items():
        await store.write_broker_config(entity, config)
        carried.configs += 1
    for group in await local.configured_groups():
        await store.set_group_configs(group, await local.group_configs(group))
        carried.configs += 1
    for name, config in (await local.client_metrics_configs()).items():
        await store.set_client_metrics_configs(name, config)
        carried.configs += 1
    quotas = local.client_quotas()
    if quotas:
        changes: list[tuple[QuotaEntity, dict[str, float | None]]] = [
            (entity, dict(config)) for entity, config in quotas.items()]
        await store.alter_client_quotas(changes)
        carried.configs += len(quotas)


def _next_producer_id(data_dir: Path) -> int:
    """The first producer id the single broker had not handed out a block of (0: none)."""
    try:
        doc = json.loads((data_dir / PRODUCER_ID_FILE).read_bytes())
    except FileNotFoundError:
        return 0
    return int(doc["next_block_start"])


def _sqlite_sidecars(path: Path) -> list[Path]:
    return [path.with_name(path.name + suffix) for suffix in ("-wal", "-shm", "-journal")]


def fsync_path(path: Path) -> None:
    """A file's data, or a directory's entries, on disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
