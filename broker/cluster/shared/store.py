"""The metadata the broker processes of one host share without ZooKeeper
(`samsa.metadata.shared.file`): the ZooKeeper store itself (zk/store.py, every part of it:
registrations, the controller's election and fencing, partition states and ISR writes, topics,
configs, quotas, SCRAM users, ACLs, delegation tokens, features, producer-id blocks) on a tree
of znodes kept in one SQLite file (znodes.py) instead of a ZooKeeper ensemble. Each process
holds a session there whose lease (zookeeper.session.timeout.ms) it renews; a process killed
loses its registration when the lease passes (at once when its pid is seen gone), and the
controller (the process that won the election, as in a ZooKeeper cluster) moves its
partitions' leadership as it would on a ZooKeeper session's expiry.
"""

from __future__ import annotations

from pathlib import Path

from ..metadata_store import BrokerInfo
from ..zk.client import ZkClientSettings
from ..zk.session import ZkSession
from ..zk.store import ZkMetadataStore
from .znodes import SqliteZk


class SharedMetadataStore(ZkMetadataStore):
    def __init__(self, path: Path, broker: BrokerInfo, session_timeout_ms: int = 18000, *,
                 initial_levels: dict[str, int] | None = None) -> None:
        self.path = Path(path)
        client = SqliteZk(self.path, session_timeout_ms / 1000)
        session = ZkSession(str(self.path), ZkClientSettings(), session_timeout_ms, None,
                            client=client)
        super().__init__(str(self.path), broker, session_timeout_ms,
                         initial_levels=initial_levels, session=session)
