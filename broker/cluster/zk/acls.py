"""The ZooKeeper metadata store's ACLs: Kafka's AclAuthorizer znodes and change notifications."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from ...security.authorizer import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclCache,
    PatternType,
    ResourcePattern,
    ResourceType,
    entries_from_json,
    entries_to_json,
    from_pascal,
    pascal,
)
from .common import dumps as _dumps
from .session import ZkSession

# The store's own logger, as before the store was split in parts (samsa.log.loggers).
log = logging.getLogger("samsa.broker.cluster.zk.store")


ACL_CHANGES = "/kafka-acl-changes"
ACL_EXTENDED_CHANGES = "/kafka-acl-extended-changes"
ACL_EXTENDED_PREFIXED = "/kafka-acl-extended/prefixed"
ACL_CHANGE_PREFIX = "acl_changes_"
ACL_CHANGE_EXPIRATION_MS = 15 * 60 * 1000
CONCRETE_TYPES = frozenset(t for t in ResourceType
                           if t not in (ResourceType.ANY, ResourceType.UNKNOWN))


def _acl_path(p: ResourcePattern) -> str:
    root = "/kafka-acl" if p.pattern_type == PatternType.LITERAL else ACL_EXTENDED_PREFIXED
    return f"{root}/{pascal(p.resource_type.name)}/{p.name}"


def _acl_change_pattern(path: str, data: bytes) -> ResourcePattern:
    """The resource a change notification names (Kafka's Literal/ExtendedAclChangeStore)."""
    if path == ACL_CHANGES:
        type_name, sep, name = data.decode().partition(":")
        if not sep:
            raise ValueError(f"expected ResourceType:ResourceName, got {data!r}")
        return ResourcePattern.named(type_name.upper(), name, PatternType.LITERAL.name)
    doc = json.loads(data)
    if doc["version"] > 1:
        raise ValueError(f"unsupported ACL change event version {doc['version']}")
    return ResourcePattern.named(doc["resourceType"].upper(), doc["name"],
                                 doc["patternType"].upper())


class ZkAcls:
    """The cluster's ACLs, read at start and kept current by the change notifications."""

    def __init__(self, session: ZkSession) -> None:
        self._session = session
        self._zk = session.zk
        self._acl_cache = AclCache()
        self._acl_changes_seen: dict[str, set[str]] = {}  # change path -> notifications read
        self._acl_change_ctimes: dict[str, int] = {}  # notification -> its ctime (to purge)

    # Kafka's AclAuthorizer layout (see the module doc): every ACL is read at start, then each
    # change notification (written by the broker that changed a resource's ACLs) makes every
    # broker re-read that resource's znode.
    def acls(self) -> AclCache:
        return self._acl_cache

    async def create_acls(self, bindings: list[AclBinding]) -> list[str | None]:
        results: list[str | None] = [None] * len(bindings)
        by_pattern: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for i, b in enumerate(bindings):
            if "/" in b.pattern.name:  # a znode name (Kafka's AclAuthorizer refuses it too)
                results[i] = f"ACL binding contains invalid resource name: {b.pattern.name}"
            else:
                by_pattern.setdefault(b.pattern, set()).add(b.entry)
        for pattern, entries in by_pattern.items():
            def add(cur: frozenset[AccessControlEntry],
                    entries: set[AccessControlEntry] = entries) -> frozenset[AccessControlEntry]:
                return cur | entries

            new = await asyncio.to_thread(self._update_acls, pattern, add)
            self._acl_cache.set(pattern, new)
        return results

    async def delete_acls(self, filters: list[AclBindingFilter]) -> list[list[AclBinding]]:
        out: list[list[AclBinding]] = [[] for _ in filters]
        patterns = dict.fromkeys(self._acl_cache.patterns())
        for f in filters:  # an exact pattern is read from ZooKeeper even if not seen yet
            if (f.name and "/" not in f.name and f.resource_type in CONCRETE_TYPES
                    and f.pattern_type in (PatternType.LITERAL, PatternType.PREFIXED)):
                patterns[ResourcePattern(ResourceType(f.resource_type), f.name,
                                         PatternType(f.pattern_type))] = None
        for pattern in patterns:
            matching = [(i, f) for i, f in enumerate(filters) if f.matches_pattern(pattern)]
            if not matching:
                continue
            removed: dict[AccessControlEntry, int] = {}

            def drop(cur: frozenset[AccessControlEntry],
                     matching: list[tuple[int, AclBindingFilter]] = matching,
                     removed: dict[AccessControlEntry, int] = removed
                     ) -> frozenset[AccessControlEntry]:
                removed.clear()
                for e in cur:
                    for i, f in matching:
                        if f.matches_entry(e):
                            removed.setdefault(e, i)
                return cur - removed.keys()

            new = await asyncio.to_thread(self._update_acls, pattern, drop)
            self._acl_cache.set(pattern, new)
            for e in removed:
                for i, f in matching:
                    if f.matches_entry(e):
                        out[i].append(AclBinding(pattern, e))
        return out

    async def refresh(self) -> None:
        """Read every ACL again (after a new session: changes announced meanwhile missed)."""
        self._set_all_acls(await asyncio.to_thread(self._read_all_acls))

    def _update_acls(
        self, pattern: ResourcePattern,
        change: Callable[[frozenset[AccessControlEntry]], frozenset[AccessControlEntry]],
    ) -> frozenset[AccessControlEntry]:
        """Read-modify-write one resource's znode, conditional on its version (retried when
        another broker wrote it meanwhile), then announce the change."""
        path = _acl_path(pattern)
        while True:
            try:
                data, stat = self._zk.get(path)
                current, version = entries_from_json(json.loads(data)), stat.version
            except NoNodeError:
                current, version = frozenset(), -1
            new = change(current)
            if new == current:
                return new
            try:
                if version < 0:
                    self._zk.create(path, _dumps(entries_to_json(new)), makepath=True)
                elif new:
                    self._zk.set(path, _dumps(entries_to_json(new)), version=version)
                else:
                    self._zk.delete(path, version=version)
            except (BadVersionError, NodeExistsError, NoNodeError):
                continue
            break
        if pattern.pattern_type == PatternType.LITERAL:
            self._zk.create(f"{ACL_CHANGES}/{ACL_CHANGE_PREFIX}",
                            f"{pattern.resource_type.name}:{pattern.name}".encode(),
                            sequence=True, makepath=True)
        else:
            self._zk.create(f"{ACL_EXTENDED_CHANGES}/{ACL_CHANGE_PREFIX}", _dumps({
                "version": 1, "resourceType": pattern.resource_type.name,
                "name": pattern.name, "patternType": pattern.pattern_type.name}),
                sequence=True, makepath=True)
        return new

    def start(self) -> None:
        """(kazoo thread, at start) Read every ACL, then follow the change notifications."""
        for path in (ACL_CHANGES, ACL_EXTENDED_CHANGES, "/kafka-acl", ACL_EXTENDED_PREFIXED):
            self._zk.ensure_path(path)
        for path in (ACL_CHANGES, ACL_EXTENDED_CHANGES):  # what the full read below covers
            self._acl_changes_seen[path] = set(self._zk.get_children(path))
            for child in self._acl_changes_seen[path]:
                stat = self._zk.exists(f"{path}/{child}")
                if stat is not None:
                    self._acl_change_ctimes[f"{path}/{child}"] = stat.ctime
            self._purge_acl_changes()
        self._set_all_acls(self._read_all_acls())
        self._zk.ChildrenWatch(ACL_CHANGES, lambda c: self._on_acl_changes(ACL_CHANGES, c))
        self._zk.ChildrenWatch(ACL_EXTENDED_CHANGES,
                               lambda c: self._on_acl_changes(ACL_EXTENDED_CHANGES, c))

    def _read_all_acls(self) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        out = {}
        for root, ptype in (("/kafka-acl", PatternType.LITERAL),
                            (ACL_EXTENDED_PREFIXED, PatternType.PREFIXED)):
            for type_name in self._zk.get_children(root):
                try:
                    rtype = ResourceType(from_pascal(ResourceType, type_name))
                except ValueError:
                    continue
                try:
                    names = self._zk.get_children(f"{root}/{type_name}")
                except NoNodeError:
                    continue
                for name in names:
                    pattern = ResourcePattern(rtype, name, ptype)
                    out[pattern] = self._read_acls(pattern)
        return out

    def _set_all_acls(self, acls: dict[ResourcePattern, frozenset[AccessControlEntry]]) -> None:
        for pattern in self._acl_cache.patterns():
            if pattern not in acls:
                self._acl_cache.set(pattern, ())
        for pattern, entries in acls.items():
            self._acl_cache.set(pattern, entries)

    def _read_acls(self, pattern: ResourcePattern) -> frozenset[AccessControlEntry]:
        try:
            return entries_from_json(json.loads(
                self._zk.retry(self._zk.get, _acl_path(pattern))[0]))
        except NoNodeError:
            return frozenset()
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("ignoring the unreadable ACLs of %s: %s", pattern, exc)
            return frozenset()

    def _on_acl_changes(self, path: str, children: list[str]) -> None:
        seen = self._acl_changes_seen.setdefault(path, set())
        for child in sorted(set(children) - seen):
            seen.add(child)
            try:
                # (retried: the child is marked seen, a lost read would lose the change)
                data, stat = self._zk.retry(self._zk.get, f"{path}/{child}")
                pattern = _acl_change_pattern(path, data)
            except NoNodeError:
                continue
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                log.warning("ignoring the unreadable ACL change %s/%s: %s", path, child, exc)
                continue
            self._session.call(self._acl_cache.set, pattern, self._read_acls(pattern))
            self._acl_change_ctimes[f"{path}/{child}"] = stat.ctime
        seen.intersection_update(children)
        self._purge_acl_changes()

    def _purge_acl_changes(self) -> None:
        """Delete the change notifications older than Kafka's 15 minutes (every broker has
        read them by then; Kafka's ZkNodeChangeNotificationListener purges them so)."""
        expired = time.time() * 1000 - ACL_CHANGE_EXPIRATION_MS
        for path, ctime in list(self._acl_change_ctimes.items()):
            if ctime >= expired:
                continue
            del self._acl_change_ctimes[path]
            try:
                self._zk.delete(path)
            except NoNodeError:
                pass  # another broker purged it first
