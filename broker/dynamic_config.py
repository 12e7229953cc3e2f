"""Dynamic broker configs at run time (Kafka's DynamicBrokerConfig and DynamicConfigManager).

The metadata store keeps this broker's dynamic configs and the cluster-wide defaults
(ZooKeeper's /config/brokers/<id> and /config/brokers/<default>, or the single broker's
metadata file) and calls back when either changes, whichever broker changed it. Each change
replaces the two dynamic layers of the broker's one `BrokerConfig` (code that reads a value
when it needs it sees the new one), then tells the parts that hold a value of their own
(`add_reconfigurable`) which effective values changed. Alter requests go through `alter`:
Kafka's validation (config/dynamic.py), then the store.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from samsa.config.dynamic import DEFAULT_ENTITY, usable, validate_update
from samsa.config.schema import DYNAMIC_BROKER_CONFIGS, BrokerConfig, ConfigError

if TYPE_CHECKING:
    from .metadata_store import MetadataStore

log = logging.getLogger(__name__)

# Called with the names whose effective value changed.
Reconfigurable = Callable[[set[str]], None]


class DynamicBrokerConfig:
    def __init__(self, config: BrokerConfig, store: MetadataStore, broker_id: int) -> None:
        self.config = config
        self.store = store
        self.broker_id = broker_id
        self._reconfigurables: list[Reconfigurable] = []

    def add_reconfigurable(self, fn: Reconfigurable) -> None:
        self._reconfigurables.append(fn)

    def start(self) -> None:
        """Apply what the store holds now, and follow its changes."""
        self.store.add_broker_config_listener(self._on_change)
        self._apply()

    def entity(self, resource_name: str) -> str:
        """The store's entity of a BROKER resource name ("" is the cluster default)."""
        return DEFAULT_ENTITY if resource_name == "" else str(self.broker_id)

    async def alter(self, resource_name: str,
                    change: Callable[[dict[str, str]], dict[str, str]],
                    validate_only: bool) -> None:
        """Change the dynamic configs of this broker (`resource_name` its id) or the cluster
        default (""): `change` maps the stored set to the new one, which is validated as a
        whole. Raises DynamicConfigError (or what `change` raises)."""
        per_broker = resource_name != ""
        entity = self.entity(resource_name)
        new = change(await self.store.read_broker_config(entity))
        validate_update(self.config, new, per_broker)
        if validate_only:
            return
        what = f"broker {self.broker_id}" if per_broker else "brokers"
        log.info("Updating %s with new configuration : %s", what,
                 ",".join(f"{k} -> {v}" for k, v in sorted(new.items())))
        await self.store.write_broker_config(entity, new)

    def _on_change(self, entity: str, _config: dict[str, str]) -> None:
        if entity in (DEFAULT_ENTITY, str(self.broker_id)):
            self._apply()

    def _apply(self) -> None:
        stored = self.store.broker_configs()
        own = usable(stored.get(str(self.broker_id), {}),
                     f"dynamic configs of broker {self.broker_id}")
        default = usable(stored.get(DEFAULT_ENTITY, {}), "dynamic default broker configs")
        before = {name: self.config[name] for name in DYNAMIC_BROKER_CONFIGS}
        try:
            self.config.set_dynamic(own, default)
        except ConfigError as exc:
            log.error("dynamic broker configs could not be applied (broker %s, default %s): %s",
                      sorted(own), sorted(default), exc)
            return
        changed = {n for n in DYNAMIC_BROKER_CONFIGS if self.config[n] != before[n]}
        if not changed:
            return
        log.info("dynamic broker configs applied: %s",
                 ", ".join(f"{n}={self.config[n]}" for n in sorted(changed)))
        for fn in self._reconfigurables:
            try:
                fn(changed)
            except Exception:
                log.exception("reconfiguring after a dynamic config change failed")
