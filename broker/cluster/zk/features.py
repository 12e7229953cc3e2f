"""The ZooKeeper metadata store's finalized feature levels: Kafka's /feature znode."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from ..features import FinalizedFeatures
from .common import dumps as _dumps
from .session import ZkSession

# The store's own logger, as before the store was split in parts (samsa.log.loggers).
log = logging.getLogger("samsa.broker.cluster.zk.store")

FEATURE = "/feature"  # the finalized feature levels (Kafka's FeatureZNode)


def feature_doc(levels: dict[str, int]) -> bytes:
    return _dumps({"version": 2, "status": 1, "features": {
        name: {"max_version_level": level} for name, level in sorted(levels.items())}})


def read_feature_doc(data: bytes, epoch: int) -> FinalizedFeatures:
    doc = json.loads(data)
    levels = {str(name): int(v["max_version_level"]) for name, v in doc["features"].items()}
    return FinalizedFeatures(epoch, {n: v for n, v in levels.items() if v > 0})


class ZkFeatures:
    """The finalized feature levels, kept current by a watch (epoch: the znode's zkVersion)."""

    def __init__(self, session: ZkSession) -> None:
        self._session = session
        self._zk = session.zk
        self._features = FinalizedFeatures()

    def create(self, levels: dict[str, int]) -> None:
        """(worker thread) Finalize `levels` unless /feature exists."""
        try:
            self._zk.create(FEATURE, feature_doc(levels))
        except NodeExistsError:
            pass

    def create_with(self, transaction: Any, path: str, data: bytes,
                    levels: dict[str, int]) -> bool:
        """(worker thread) Create `path` and finalize `levels` in `transaction` (kazoo's),
        both or neither: whether both were created."""
        transaction.create(path, data)
        transaction.create(FEATURE, feature_doc(levels))
        return not any(isinstance(r, Exception) for r in transaction.commit())

    def start(self) -> None:
        """(worker thread) Follow /feature."""
        self._zk.DataWatch(FEATURE, self._on_features)

    def _on_features(self, data: bytes | None, stat: Any) -> bool:
        if data is not None:
            try:
                features = read_feature_doc(data, stat.version)
            except (ValueError, KeyError, TypeError, AttributeError):
                log.warning("ignoring unreadable %s", FEATURE)
                return True
            self._session.call(self._set_features, features)
        return True

    def _set_features(self, features: FinalizedFeatures) -> None:
        if features.epoch >= self._features.epoch:
            self._features = features

    def finalized_features(self) -> FinalizedFeatures:
        return self._features

    async def update_features(
        self, apply: Callable[[dict[str, int]], dict[str, int]]
    ) -> FinalizedFeatures:
        """Compare-and-set of /feature: `apply` sees the levels as ZooKeeper holds them."""
        features = await asyncio.to_thread(self._update_features, apply)
        self._set_features(features)
        return features

    def _update_features(
        self, apply: Callable[[dict[str, int]], dict[str, int]]
    ) -> FinalizedFeatures:
        while True:
            try:
                data, stat = self._zk.get(FEATURE)
                current = read_feature_doc(data, stat.version).levels
            except NoNodeError:
                current, stat = {}, None
            levels = apply(current)
            try:
                if stat is None:
                    self._zk.create(FEATURE, feature_doc(levels))
                    return FinalizedFeatures(0, levels)
                stat = self._zk.set(FEATURE, feature_doc(levels), version=stat.version)
                return FinalizedFeatures(stat.version, levels)
            except (BadVersionError, NodeExistsError):
                continue
