"""Kafka's LogDirFailureChannel: the one place an I/O error on a log directory is reported.

Whatever touches the disk (appends, reads, flushes, checkpoints) and gets an `OSError` reports
the directory here and fails its caller with `KafkaStorageError` (56). A directory is reported
once: it is offline from then on, until the broker restarts. The broker's handler
(`listener`, called on the reporting thread) stops serving the directory's partitions."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)


def dir_key(path: Path | str) -> str:
    """The name a log directory is known by: its absolute path (no syscall, unlike resolve)."""
    return os.path.abspath(path)


class LogDirFailureChannel:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.offline: set[str] = set()  # read unlocked on hot paths: a set lookup of a str
        self.listener: Callable[[str], None] | None = None

    def is_offline(self, key: str) -> bool:
        return key in self.offline

    def maybe_add_offline_log_dir(self, log_dir: Path | str, msg: str, exc: BaseException) -> None:
        key = dir_key(log_dir)
        log.error("%s: %s", msg, exc)
        with self._lock:
            if key in self.offline:
                return
            self.offline = self.offline | {key}  # a new set: unlocked readers never see it grow
        if self.listener is not None:
            self.listener(key)
