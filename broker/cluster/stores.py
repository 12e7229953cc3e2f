"""Which metadata store a broker keeps: ZooKeeper's in a cluster (zookeeper.connect), the
file the processes of one node share (samsa.metadata.shared.file), else the one broker's own
file in its data directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .features import initial_levels
from .metadata_store import BrokerEndpoint, BrokerInfo, LocalMetadataStore
from .shared.store import SharedMetadataStore
from .zk.client import ZkClientSettings
from .zk.store import ZkMetadataStore


def open_metadata_store(config: Any, data_dir: Path) -> ZkMetadataStore | LocalMetadataStore:
    """This broker's store, registering it as the advertised listeners say; what only
    ZooKeeper's (or the shared file's) has is reached through a ZkMetadataStore."""
    advertised = config.advertised_listener
    endpoints = tuple(BrokerEndpoint(li.name, li.host, li.port, li.security_protocol)
                      for li in config.advertised_listeners)
    info = BrokerInfo(config.broker_id, advertised.host, advertised.port, config["broker.rack"],
                      endpoints)
    initial = initial_levels(config)  # a new cluster's feature levels
    zookeeper: str | None = config["zookeeper.connect"]
    shared = config["samsa.metadata.shared.file"]
    if not zookeeper and shared:  # the processes of one node, without ZooKeeper
        return SharedMetadataStore(Path(shared), info, config["zookeeper.session.timeout.ms"],
                                   initial_levels=initial)
    if not zookeeper:
        return LocalMetadataStore(data_dir, info, initial_levels=initial)
    return ZkMetadataStore(
        zookeeper,
        info,
        config["zookeeper.session.timeout.ms"],
        config["zookeeper.connection.timeout.ms"],
        ZkClientSettings(config),
        initial_levels=initial,
    )
