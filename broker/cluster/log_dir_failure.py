"""A log directory failed (storage/log_dir_failure.py reports it, on any thread): its replicas
stop being served here, the controller is told which are offline (ZooKeeper's
/log_dir_event_notification) so that it moves their leadership and takes them out of the
ISRs, and the broker halts when no log directory is left or the one holding the single
broker's metadata failed (Kafka's ReplicaManager.handleLogDirFailure and its
LogDirFailureHandler)."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

from samsa.storage.log_dir_failure import dir_key
from samsa.storage.log_dirs import LogDirs

from ..replication.replica_manager import ReplicaManager
from .metadata_store import LocalMetadataStore, MetadataStore
from .zk.store import ZkMetadataStore

log = logging.getLogger(__name__)


def halt(reason: str) -> None:
    """Kafka's Exit.halt(1): no shutdown (it would write to the failed disks)."""
    log.critical(reason)
    logging.shutdown()
    os._exit(1)


class LogDirFailureHandler:
    def __init__(self, replicas: ReplicaManager, log_dirs: LogDirs, store: MetadataStore,
                 data_dir: Path) -> None:
        self.replicas = replicas
        self.log_dirs = log_dirs
        # The single broker's metadata lives in its data directory (Kafka halts when its
        # metadata dir fails); in a cluster the controller is told of offline replicas.
        self._metadata_dir = dir_key(data_dir) if isinstance(store, LocalMetadataStore) else None
        self._zk = store if isinstance(store, ZkMetadataStore) else None
        self._offline_report: asyncio.Task[None] | None = None
        if self._zk is not None:
            replicas.offline_listener = self._on_offline_replicas

    def listen(self) -> None:
        """From the running loop: failures reported on any thread are handled on it."""
        loop = asyncio.get_running_loop()

        def on_failure(key: str) -> None:  # on the reporting thread
            loop.call_soon_threadsafe(self.on_failure, key)

        self.log_dirs.failure_channel.listener = on_failure

    def on_failure(self, key: str) -> None:
        """A log directory had an I/O error (run on the loop)."""
        self.replicas.handle_log_dir_failure(key)
        live = self.log_dirs.live_dirs
        if not live:
            halt(f"Shutdown broker because all log dirs in "
                 f"{', '.join(self.log_dirs.dirs)} have failed")
        if key == self._metadata_dir:
            halt(f"Shutdown broker because the metadata log dir {key} has failed")
        log.warning("Stopped serving replicas in dir %s", key)

    def _on_offline_replicas(self) -> None:
        """Tell the controller (ZooKeeper's /log_dir_event_notification) which replicas are
        offline here, so that it moves their leadership and takes them out of the ISR."""
        if self._offline_report is None or self._offline_report.done():
            self._offline_report = asyncio.get_running_loop().create_task(self._report_offline())

    async def _report_offline(self) -> None:
        zk = self._zk
        assert zk is not None  # the only store with a controller to tell
        while True:
            offline = set(self.replicas.offline)
            try:
                await zk.registry.report_offline_replicas(offline)
            except Exception as exc:
                log.warning("reporting offline replicas to ZooKeeper failed (retrying): %r", exc)
                await asyncio.sleep(1)
                continue
            if self.replicas.offline <= offline:
                return
