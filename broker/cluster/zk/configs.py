"""The ZooKeeper metadata store's /config entities: client quotas, dynamic broker configs, and
the /config/changes notifications that announce them; and group configs."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote, unquote

from kazoo.exceptions import (
    BadVersionError,
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
    SessionExpiredError,
)

from samsa.config.dynamic import DEFAULT_ENTITY

from ..metadata_store import (
    QUOTA_CLIENT_ID,
    QUOTA_CONFIGS,
    QUOTA_DEFAULT,
    QUOTA_USER,
    ClientQuotas,
    QuotaEntity,
)
from .common import dumps as _dumps
from .common import put_znode
from .common import sanitize as _sanitize
from .session import ZkSession

# The store's own logger, as before the store was split in parts (samsa.log.loggers).
log = logging.getLogger("samsa.broker.cluster.zk.store")


def _quota_entity_of(user: str | None, client: str | None) -> QuotaEntity:
    """The entity of sanitized ZooKeeper names (None: the component is absent)."""
    def name(n: str) -> str | None:
        return None if n == QUOTA_DEFAULT else unquote(n)

    components: list[tuple[str, str | None]] = []
    if client is not None:
        components.append((QUOTA_CLIENT_ID, name(client)))
    if user is not None:
        components.append((QUOTA_USER, name(user)))
    return tuple(components)


def _quota_entity_of_path(path: str) -> QuotaEntity | None:
    """users/<u>, users/<u>/clients/<c> or clients/<c>; None for any other entity path."""
    parts = path.split("/")
    if len(parts) == 2 and parts[0] == "users":
        return _quota_entity_of(parts[1], None)
    if len(parts) == 4 and parts[0] == "users" and parts[2] == "clients":
        return _quota_entity_of(parts[1], parts[3])
    if len(parts) == 2 and parts[0] == "clients":
        return _quota_entity_of(None, parts[1])
    return None


def _quota_path_of_entity(entity: QuotaEntity) -> str:
    names = dict(entity)

    def zk_name(n: str | None) -> str:
        return QUOTA_DEFAULT if n is None else _sanitize(n)

    if QUOTA_USER in names:
        path = f"users/{zk_name(names[QUOTA_USER])}"
        if QUOTA_CLIENT_ID in names:
            path += f"/clients/{zk_name(names[QUOTA_CLIENT_ID])}"
        return path
    return f"clients/{zk_name(names[QUOTA_CLIENT_ID])}"


_NOTIFICATION_EXPIRY_MS = 15 * 60 * 1000


def _notification_seq(name: str) -> int:
    digits = name[len("config_change_"):]
    return int(digits) if digits.isdigit() else -1


class ZkConfigs:
    """Client quotas, dynamic broker configs and group configs, and the /config/changes
    notifications that announce the first two."""

    def __init__(self, session: ZkSession, broker_id: int) -> None:
        self._session = session
        self._zk = session.zk
        self._broker_id = broker_id
        self.quotas = ClientQuotas()  # the cache, and who is told of its changes
        self._quota_notification_seen: int | None = None
        # Dynamic broker configs of this broker and the cluster default (entity -> config).
        self._broker_configs: dict[str, dict[str, str]] = {}
        self._broker_config_listeners: list[Callable[[str, dict[str, str]], None]] = []

    def start(self) -> None:
        """(worker thread) Dynamic broker configs are in place before the broker starts
        serving (Kafka's DynamicBrokerConfig.initialize); the notifications keep them current."""
        self._broker_configs = {e: self._read_broker_config(e) for e in self._config_entities()}
        self._start_client_quotas()

    # ---- client quotas ------------------------------------------------------------------------
    # Kafka's layout: /config/users/<user>, /config/users/<user>/clients/<client-id>,
    # /config/clients/<client-id> ({"version":1,"config":{"producer_byte_rate":"1024",...}};
    # names sanitized as Kafka's Sanitizer does, <default> for the default), each write
    # announced by a /config/changes/config_change_<seq> node {"version":2,
    # "entity_path":"users/<user>/clients/<client-id>"}. Every broker watches /config/changes
    # and re-reads the entities named there. A user's node also holds its SCRAM credentials:
    # a quota write changes only the quota keys of its "config" (conditional on the version
    # read, so that a concurrent write is never lost).
    async def alter_client_quotas(
        self, changes: list[tuple[QuotaEntity, dict[str, float | None]]]
    ) -> None:
        """Per entity: key -> new value, or None to remove the key."""
        updates = await asyncio.to_thread(self._write_client_quotas, changes)
        self._apply_client_quotas(updates)

    def _start_client_quotas(self) -> None:
        for path in ("/config/clients", "/config/changes"):
            self._zk.ensure_path(path)
        self._zk.ChildrenWatch("/config/changes", self._on_config_changes)

    def _on_config_changes(self, children: list[str]) -> bool:
        seqs = sorted((_notification_seq(c), c) for c in children
                      if c.startswith("config_change_"))
        def read() -> tuple[dict[Any, Any], dict[str, dict[str, str]]]:
            brokers: dict[str, dict[str, str]] = {}
            if self._quota_notification_seen is None:  # the first call: read every entity
                updates = self._read_all_client_quotas()
                brokers = {e: self._read_broker_config(e) for e in self._config_entities()}
                return updates, brokers
            paths = []
            for seq, name in seqs:
                if seq <= self._quota_notification_seen:
                    continue
                try:
                    doc = json.loads(self._zk.get(f"/config/changes/{name}")[0])
                    paths.append(str(doc["entity_path"]))
                except (NoNodeError, ValueError, KeyError, TypeError):
                    continue
            updates = {}
            for path in dict.fromkeys(paths):
                entity = _quota_entity_of_path(path)
                if entity is not None:
                    updates[entity] = self._read_quota_config(f"/config/{path}")
                kind, _, name = path.partition("/")
                if kind == "brokers" and name in self._config_entities():
                    brokers[name] = self._read_broker_config(name)
            return updates, brokers

        # Read again after a lost connection: kazoo's ChildrenWatch does not call again for
        # the children it has passed, so a change skipped here would wait for the next one.
        updates, brokers = self._zk.retry(read)
        if seqs:
            self._quota_notification_seen = max(self._quota_notification_seen or -1, seqs[-1][0])
        elif self._quota_notification_seen is None:
            self._quota_notification_seen = -1
        if updates:
            self._session.call(self._apply_client_quotas, updates)
        for name, config in brokers.items():
            self._session.call(self._set_broker_config, name, config)
        self._purge_notifications([name for _, name in seqs])
        return True

    def _purge_notifications(self, names: list[str]) -> None:
        """Kafka's ZkNodeChangeNotificationListener: notifications older than 15 minutes are
        deleted (by whichever broker sees them first), oldest first."""
        now_ms = time.time() * 1000
        for name in names:
            path = f"/config/changes/{name}"
            try:
                stat = self._zk.exists(path)
                if stat is None:
                    continue
                if now_ms - stat.ctime < _NOTIFICATION_EXPIRY_MS:
                    return
                self._zk.delete(path)
            except NoNodeError:
                continue
            except (ConnectionLoss, SessionExpiredError):
                return

    def _read_config_znode(self, path: str) -> dict[str, Any]:
        """The "config" object of a /config/... znode ({} if it is missing or unreadable)."""
        try:
            data = self._zk.get(path)[0]
            config = json.loads(data).get("config", {}) if data else {}
        except NoNodeError:
            return {}
        except (ValueError, AttributeError):
            log.warning("ignoring unreadable %s", path)
            return {}
        return config or {}

    def _read_quota_config(self, path: str) -> dict[str, float]:
        config = self._read_config_znode(path)
        out = {}
        for key, value in config.items():
            if key in QUOTA_CONFIGS:
                try:
                    out[str(key)] = float(value)
                except (TypeError, ValueError):
                    log.warning("ignoring the unreadable quota %s=%r in %s", key, value, path)
        return out

    def _read_all_client_quotas(self) -> dict[QuotaEntity, dict[str, float]]:
        out: dict[QuotaEntity, dict[str, float]] = {}
        for user in self._zk.get_children("/config/users"):
            out[_quota_entity_of(user, None)] = self._read_quota_config(f"/config/users/{user}")
            try:
                clients = self._zk.get_children(f"/config/users/{user}/clients")
            except NoNodeError:
                clients = []
            for client in clients:
                out[_quota_entity_of(user, client)] = self._read_quota_config(
                    f"/config/users/{user}/clients/{client}")
        for client in self._zk.get_children("/config/clients"):
            out[_quota_entity_of(None, client)] = self._read_quota_config(
                f"/config/clients/{client}")
        return out

    def _apply_client_quotas(self, updates: dict[QuotaEntity, dict[str, float]]) -> None:
        quotas = dict(self.quotas.current)
        for entity, config in updates.items():
            if config:
                quotas[entity] = config
            else:
                quotas.pop(entity, None)
        if quotas == self.quotas.current:
            return
        self.quotas.current = quotas
        self.quotas.notify()

    def _write_client_quotas(
        self, changes: list[tuple[QuotaEntity, dict[str, float | None]]]
    ) -> dict[QuotaEntity, dict[str, float]]:
        out: dict[QuotaEntity, dict[str, float]] = {}
        for entity, ops in changes:
            entity_path = _quota_path_of_entity(entity)
            path = f"/config/{entity_path}"
            while True:
                try:
                    data, stat = self._zk.get(path)
                    doc = json.loads(data) if data else {}
                    version: int | None = stat.version
                except NoNodeError:
                    doc, version = {}, None
                config = {str(k): str(v) for k, v in (doc.get("config") or {}).items()}
                for key, value in ops.items():
                    if value is None:
                        config.pop(key, None)
                    else:
                        config[key] = (str(int(value)) if QUOTA_CONFIGS.get(key) is int
                                       else repr(float(value)))
                new = _dumps({"version": 1, "config": config})
                try:
                    if version is None:
                        self._zk.create(path, new, makepath=True)
                    else:
                        self._zk.set(path, new, version=version)
                    break
                except (BadVersionError, NodeExistsError, NoNodeError):
                    continue  # written meanwhile (SCRAM, another broker): read it again
            self._zk.create("/config/changes/config_change_",
                            _dumps({"version": 2, "entity_path": entity_path}),
                            sequence=True, makepath=True)
            out[entity] = {k: float(v) for k, v in config.items() if k in QUOTA_CONFIGS}
        return out

    # ---- dynamic broker configs ---------------------------------------------------------------
    # Kafka's layout: /config/brokers/<id> and /config/brokers/<default>
    # ({"version":1,"config":{"log.retention.ms":"1000",...}}), each write announced by a
    # /config/changes/config_change_<seq> node {"version":2,"entity_path":"brokers/<id>"}.
    # A broker follows its own entity and the default.
    def _config_entities(self) -> tuple[str, str]:
        return str(self._broker_id), DEFAULT_ENTITY

    def _read_broker_config(self, entity: str) -> dict[str, str]:
        config = self._read_config_znode(f"/config/brokers/{entity}")
        return {str(k): str(v) for k, v in config.items()}

    def _set_broker_config(self, entity: str, config: dict[str, str]) -> None:
        if self._broker_configs.get(entity, {}) == config:
            return
        self._broker_configs[entity] = config
        for fn in self._broker_config_listeners:
            fn(entity, dict(config))

    def broker_configs(self) -> dict[str, dict[str, str]]:
        return {e: dict(c) for e, c in self._broker_configs.items()}

    def add_broker_config_listener(self, fn: Callable[[str, dict[str, str]], None]) -> None:
        self._broker_config_listeners.append(fn)

    async def read_broker_config(self, entity: str) -> dict[str, str]:
        return await asyncio.to_thread(self._read_broker_config, entity)

    async def write_broker_config(self, entity: str, config: dict[str, str]) -> None:
        await asyncio.to_thread(self._write_broker_config, entity, config)
        if entity in self._config_entities():
            self._set_broker_config(entity, dict(config))

    def _write_broker_config(self, entity: str, config: dict[str, str]) -> None:
        put_znode(self._zk, f"/config/brokers/{entity}", _dumps({"version": 1, "config": config}))
        self._zk.create("/config/changes/config_change_",
                        _dumps({"version": 2, "entity_path": f"brokers/{entity}"}),
                        sequence=True, makepath=True)

    # ---- group configs ------------------------------------------------------------------------
    # /config/groups/<g> {"version":1,"config":{...}}, <g> percent-encoded (a group id may hold
    # '/'); read where they are used (DescribeConfigs, alter), not cached.
    async def group_configs(self, group: str) -> dict[str, str]:
        return await asyncio.to_thread(self._read_group_configs, group)

    def _read_group_configs(self, group: str) -> dict[str, str]:
        try:
            data = self._zk.get(_group_config_path(group))[0]
        except NoNodeError:
            return {}
        return dict(json.loads(data).get("config", {}))

    async def set_group_configs(self, group: str, configs: dict[str, str]) -> None:
        await asyncio.to_thread(self._write_group_configs, group, configs)

    def _write_group_configs(self, group: str, configs: dict[str, str]) -> None:
        self._write_config_znode(_group_config_path(group), configs)

    async def configured_groups(self) -> list[str]:
        return await asyncio.to_thread(self._read_configured_groups)

    def _read_configured_groups(self) -> list[str]:
        try:
            return [unquote(child) for child in self._zk.get_children("/config/groups")]
        except NoNodeError:
            return []

    # ---- client metrics subscriptions (KIP-714) ---------------------------------------------
    # /config/client-metrics/<name> {"version":1,"config":{...}}, <name> percent-encoded; read
    # whole by each broker's telemetry manager, which caches them for a few seconds.
    async def client_metrics_configs(self) -> dict[str, dict[str, str]]:
        return await asyncio.to_thread(self._read_client_metrics)

    def _read_client_metrics(self) -> dict[str, dict[str, str]]:
        out: dict[str, dict[str, str]] = {}
        try:
            children = self._zk.get_children(_CLIENT_METRICS)
        except NoNodeError:
            return out
        for child in children:
            try:
                data = self._zk.get(f"{_CLIENT_METRICS}/{child}")[0]
            except NoNodeError:
                continue
            out[unquote(child)] = dict(json.loads(data).get("config", {}))
        return out

    async def set_client_metrics_configs(self, name: str, configs: dict[str, str]) -> None:
        await asyncio.to_thread(self._write_client_metrics, name, configs)

    def _write_client_metrics(self, name: str, configs: dict[str, str]) -> None:
        self._write_config_znode(f"{_CLIENT_METRICS}/{quote(name, safe='')}", configs)

    def _write_config_znode(self, path: str, configs: dict[str, str]) -> None:
        """A /config entity's configs, written whole (the last write wins); none deletes it."""
        if not configs:
            try:
                self._zk.delete(path)
            except NoNodeError:
                pass
            return
        put_znode(self._zk, path, _dumps({"version": 1, "config": configs}))


_CLIENT_METRICS = "/config/client-metrics"


def _group_config_path(group: str) -> str:
    return f"/config/groups/{quote(group, safe='')}"
