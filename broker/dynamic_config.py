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

from samsa.config.dynamic import DEFAULT_ENTITY, DynamicConfigError, usable, validate_update
from samsa.config.password_encoder import DEFAULT_KEY_FACTORY, decode, encode
from samsa.config.schema import (
    BROKER_PROPERTIES,
    DYNAMIC_BROKER_CONFIGS,
    DYNAMIC_SECURITY_CONFIGS,
    BrokerConfig,
    ConfigError,
    ConfigType,
    split_listener_key,
)
from samsa.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from .cluster.metadata_store import MetadataStore

log = logging.getLogger(__name__)

# Called with the names whose effective value changed.
Reconfigurable = Callable[[set[str]], None]


def _loggable(name: str, value: object) -> object:
    """Kafka's toLoggableProps: a password (or what has no known type, such as a
    listener's JAAS configuration) is logged as [hidden]."""
    split = split_listener_key(name)
    prop = BROKER_PROPERTIES.get(split[1] if split is not None else name)
    if prop is None or prop.type is ConfigType.PASSWORD:
        return "[hidden]"
    return value


def is_password_config(name: str) -> bool:
    """Kafka's DynamicBrokerConfig.isPasswordConfig: a name ending in a dynamic password
    config's."""
    return any(name.endswith(p) for p in _DYNAMIC_PASSWORDS)


_DYNAMIC_PASSWORDS = tuple(sorted(
    n for n in DYNAMIC_SECURITY_CONFIGS | DYNAMIC_BROKER_CONFIGS
    if BROKER_PROPERTIES[n].type is ConfigType.PASSWORD))


class DynamicBrokerConfig:
    def __init__(self, config: BrokerConfig, store: MetadataStore, broker_id: int,
                 encrypt_passwords: bool = False) -> None:
        self.config = config
        self.store = store
        self.broker_id = broker_id
        # ZooKeeper keeps dynamic passwords encrypted with password.encoder.secret (Kafka's
        # ZooKeeper-era brokers); the single broker's metadata file keeps them as they are
        # (Kafka's KRaft brokers: PasswordEncoder.NOOP).
        self.encrypt_passwords = encrypt_passwords
        self._reconfigurables: list[Reconfigurable] = []
        self._validators: list[Callable[[BrokerConfig], None]] = []
        self._reloaders: list[Callable[[BrokerConfig], None]] = []

    def add_reconfigurable(self, fn: Reconfigurable) -> None:
        self._reconfigurables.append(fn)

    def add_validator(self, validate: Callable[[BrokerConfig], None],
                      reload: Callable[[BrokerConfig], None] | None = None) -> None:
        """`validate` checks the configuration an alter would give this broker (Kafka's
        validateReconfiguration; raises ConfigError); `reload` applies one at once when this
        broker is altered (Kafka's reloadUpdatedFilesWithoutConfigChange: a key store file
        rewritten in place is re-read even if no config changed)."""
        self._validators.append(validate)
        if reload is not None:
            self._reloaders.append(reload)

    async def start(self) -> None:
        """Apply what the store holds now (its passwords re-encoded first if
        password.encoder.old.secret is set), and follow its changes."""
        if self.encrypt_passwords and self.config["password.encoder.old.secret"]:
            await self._re_encode_passwords()
        self.store.add_broker_config_listener(self._on_change)
        self._apply()

    async def _re_encode_passwords(self) -> None:
        """Kafka's maybeReEncodePasswords: the secret changed, password.encoder.old.secret
        is the one this broker's stored passwords were encrypted with; those it decodes are
        written back encrypted with password.encoder.secret (the others are taken to be so
        already: the old secret may stay set across restarts). ConfigError when a password
        must be re-encoded but password.encoder.secret is not set (Kafka's start-up fails
        so too)."""
        entity = str(self.broker_id)
        stored = self.store.broker_configs().get(entity, {})
        old_secret = self.config["password.encoder.old.secret"]
        props = dict(stored)
        for key, value in stored.items():
            if not is_password_config(key):
                continue
            try:
                password = decode(old_secret, value)
            except ValueError:
                log.debug("Dynamic password config %s could not be decoded using old secret, "
                          "new secret will be used.", key)
                continue
            props[key] = self._encode(password, key)
        if props != stored:
            log.info("Re-encoding the dynamic password configs of broker %s with "
                     "password.encoder.secret: %s", entity,
                     ", ".join(sorted(k for k in props if props[k] != stored[k])))
            await self.store.write_broker_config(entity, props)

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
        new = change(self._decoded(await self.store.read_broker_config(entity), entity))
        candidate = validate_update(self.config, new, per_broker)
        for validate in self._validators:
            try:
                validate(candidate)
            except ConfigError as exc:
                # Kafka answers only this; the reason is in its log.
                log.info("Invalid dynamic configuration of broker %s: %s", self.broker_id, exc)
                raise DynamicConfigError(ErrorCode.invalid_request, exc.key,
                                         "Invalid dynamic configuration") from None
        if validate_only:
            return
        persistent = self._encoded(new)
        if per_broker:
            for reload in self._reloaders:
                reload(candidate)
        what = f"broker {self.broker_id}" if per_broker else "brokers"
        log.info("Updating %s with new configuration : %s", what,
                 ",".join(f"{k} -> {_loggable(k, v)}" for k, v in sorted(new.items())))
        await self.store.write_broker_config(entity, persistent)

    def _encoded(self, props: dict[str, str]) -> dict[str, str]:
        """Kafka's toPersistentProps: the passwords encrypted (ZooKeeper only)."""
        if not self.encrypt_passwords:
            return props
        return {k: self._encode(v, k) if is_password_config(k) else v for k, v in props.items()}

    def _encode(self, password: str, key: str) -> str:
        """A password encrypted with password.encoder.secret and the encoder's settings;
        DynamicConfigError (naming `key`) without the secret."""
        secret = self.config["password.encoder.secret"]
        if not secret:
            raise DynamicConfigError(ErrorCode.invalid_config, key,
                                     "Password encoder secret not configured")
        factory = self.config["password.encoder.keyfactory.algorithm"] or DEFAULT_KEY_FACTORY
        try:
            return encode(secret, password, factory, self.config["password.encoder.key.length"],
                          self.config["password.encoder.iterations"],
                          self.config["password.encoder.cipher.algorithm"])
        except ValueError as exc:  # a key length AES does not have
            raise DynamicConfigError(ErrorCode.invalid_config, "password.encoder.key.length",
                                     str(exc)) from None

    def _decoded(self, props: dict[str, str], entity: str) -> dict[str, str]:
        """Kafka's fromPersistentProps for the passwords: decrypted, or left out (with an
        error in the log) when they cannot be."""
        if not self.encrypt_passwords:
            return props
        secrets = [s for s in (self.config["password.encoder.secret"],
                               self.config["password.encoder.old.secret"]) if s]
        out = {}
        for key, value in props.items():
            if is_password_config(key):
                try:
                    value = self._decode(secrets, value)
                except ValueError as exc:
                    log.error("Dynamic password config %s of %s could not be decoded, "
                              "ignoring: %s", key, entity, exc)
                    continue
            out[key] = value
        return out

    @staticmethod
    def _decode(secrets: list[str], encoded: str) -> str:
        """Decoded with the current secret, else the old one (a value stored with the old
        secret after the start-up's re-encoding, e.g. by a tool still given it)."""
        if not secrets:
            raise ValueError("Password encoder secret not configured")
        for secret in secrets[:-1]:
            try:
                return decode(secret, encoded)
            except ValueError:
                pass
        return decode(secrets[-1], encoded)

    def _value(self, name: str) -> object:
        if split_listener_key(name) is None:
            return self.config[name]
        return self.config.dynamic_values.get(name)

    def _listener_values(self) -> dict[str, object]:
        """The per-listener (listener.name.<listener>.*) dynamic values."""
        return {k: v for k, v in self.config.dynamic_values.items()
                if split_listener_key(k) is not None}

    def _on_change(self, entity: str, _config: dict[str, str]) -> None:
        if entity in (DEFAULT_ENTITY, str(self.broker_id)):
            self._apply()

    def _apply(self) -> None:
        stored = self.store.broker_configs()
        own = usable(self._decoded(stored.get(str(self.broker_id), {}), str(self.broker_id)),
                     f"dynamic configs of broker {self.broker_id}")
        default = usable(stored.get(DEFAULT_ENTITY, {}), "dynamic default broker configs",
                         per_broker=False)
        before = {name: self.config[name] for name in DYNAMIC_BROKER_CONFIGS}
        before_prefixed = self._listener_values()
        try:
            self.config.set_dynamic(own, default)
        except ConfigError as exc:
            log.error("dynamic broker configs could not be applied (broker %s, default %s): %s",
                      sorted(own), sorted(default), exc)
            return
        changed = {n for n in DYNAMIC_BROKER_CONFIGS if self.config[n] != before[n]}
        after_prefixed = self._listener_values()
        changed |= {k for k in before_prefixed.keys() | after_prefixed.keys()
                    if before_prefixed.get(k) != after_prefixed.get(k)}
        if not changed:
            return
        log.info("dynamic broker configs applied: %s", ", ".join(
            f"{n}={_loggable(n, self._value(n))}" for n in sorted(changed)))
        for fn in self._reconfigurables:
            try:
                fn(changed)
            except Exception:
                log.exception("reconfiguring after a dynamic config change failed")
