"""Helpers the ZooKeeper metadata store's modules share."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError


def dumps(doc: dict[str, Any]) -> bytes:
    """A znode's JSON document, compact as Kafka writes it."""
    return json.dumps(doc, separators=(",", ":")).encode()


def sanitize(name: str) -> str:
    """Kafka's Sanitizer.sanitize (URL encoding, '*' and '~' escaped too)."""
    return quote(name, safe="").replace("~", "%7E")


def put_znode(zk: KazooClient, path: str, data: bytes) -> None:
    """Set a znode's data, creating it (and its parents) if missing; one created meanwhile by
    another broker is overwritten: the last write wins."""
    try:
        zk.set(path, data)
    except NoNodeError:
        try:
            zk.create(path, data, makepath=True)
        except NodeExistsError:
            zk.set(path, data)
