"""Load a BrokerConfig from a YAML file of Kafka property names plus `key=value` overrides."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import yaml

from samsa.config.schema import BrokerConfig, ConfigError

DEFAULT_CONFIG_FILE = Path(__file__).with_name("broker.yaml")


def read_yaml(path: Path) -> dict[str, object]:
    """Flat `property.name: value` pairs; nested mappings are rejected so a typo such as
    `log:\\n  dirs: x` does not silently vanish."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError("<file>", f"cannot read {path}: {e.strerror or e}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError("<file>", f"{path} is not valid YAML: {e}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError("<file>", f"{path} must be a mapping of property names to values")
    out: dict[str, object] = {}
    for key, value in data.items():
        key = str(key)
        if isinstance(value, dict):
            raise ConfigError(key, f"Invalid value for configuration {key}: expected a scalar "
                              "(use flat Kafka property names such as log.segment.bytes)")
        out[key] = value
    return out


def parse_override(text: str) -> tuple[str, str]:
    """`key=value` from the command line."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(key or text, f"Expected key=value, got {text!r}")
    return key, value


def load_config(path: Path | None, overrides: Mapping[str, str] | None = None) -> BrokerConfig:
    """The file's values, then `overrides` on top (both count as STATIC_BROKER_CONFIG)."""
    raw: dict[str, object] = read_yaml(path) if path is not None else {}
    # An override of one of node.id/broker.id must beat the file's value for the other.
    ov = dict(overrides or {})
    for a, b in (("node.id", "broker.id"), ("broker.id", "node.id")):
        if a in ov and b not in ov:
            raw.pop(b, None)
    raw.update(ov)
    return BrokerConfig(raw)
