"""Helpers the ZooKeeper metadata store's modules share."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote


def dumps(doc: dict[str, Any]) -> bytes:
    """A znode's JSON document, compact as Kafka writes it."""
    return json.dumps(doc, separators=(",", ":")).encode()


def sanitize(name: str) -> str:
    """Kafka's Sanitizer.sanitize (URL encoding, '*' and '~' escaped too)."""
    return quote(name, safe="").replace("~", "%7E")
