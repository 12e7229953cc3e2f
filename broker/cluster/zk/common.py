"""Helpers the ZooKeeper metadata store's modules share."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Generic, TypeVar
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


T = TypeVar("T")


class ChildWatches(Generic[T]):
    """A znode's children, each followed by a data watch (kazoo's thread): `parse(child,
    data)` reads a child's data (None: unreadable, passed over), and `deliver(child, value)`
    runs on the event loop (through `call`) with it, or with None once the child is gone."""

    def __init__(self, zk: KazooClient, path: str, call: Callable[..., None],
                 parse: Callable[[str, bytes], T | None],
                 deliver: Callable[[str, T | None], None]) -> None:
        self._zk = zk
        self._path = path
        self._call = call
        self._parse = parse
        self._deliver = deliver
        self._watched: set[str] = set()

    def start(self) -> None:
        """(worker thread) Follow the children."""
        self._zk.ChildrenWatch(self._path, self._on_children)

    def _on_children(self, children: list[str]) -> None:
        for child in children:
            if child not in self._watched:
                self._watched.add(child)
                self._zk.DataWatch(f"{self._path}/{child}", self._watcher(child))
        for child in self._watched - set(children):
            self._watched.discard(child)
            self._call(self._deliver, child, None)

    def _watcher(self, child: str) -> Callable[[bytes | None, Any], bool]:
        def on_change(data: bytes | None, _stat: Any) -> bool:
            if data is None:
                return child in self._watched  # False ends the watch of a removed child
            value = self._parse(child, data)
            if value is not None:
                self._call(self._deliver, child, value)
            return True

        return on_change
