"""Helpers the ZooKeeper metadata store's modules share."""

from __future__ import annotations

import json
from typing import Any


def dumps(doc: dict[str, Any]) -> bytes:
    """A znode's JSON document, compact as Kafka writes it."""
    return json.dumps(doc, separators=(",", ":")).encode()
