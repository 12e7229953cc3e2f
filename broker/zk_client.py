"""The broker's ZooKeeper client (kazoo) made from Kafka's `zookeeper.*` client properties.

TLS (`zookeeper.ssl.client.enable`): one SSLContext is built from the `zookeeper.ssl.*` key
and trust stores (PEM or PKCS12, read in memory as for the listeners, see security/tls.py),
versions, cipher suites and host-name check, and every connection kazoo opens (sessions, the
chroot's creation, four-letter words) is wrapped with it. `zookeeper.clientCnxnSocket` (Java's
Netty switch) is accepted and not needed; `zookeeper.ssl.crl.enable` and `.ocsp.enable` are
accepted, revocation is not checked.

`zookeeper.set.acl=true` creates every znode with Kafka's secure ACLs (ZkData.defaultAcls): all
rights for the creator's authenticated identity (over mutual TLS, ZooKeeper's x509 identity:
the client certificate's subject), read for anyone, except under the sensitive roots
/config/users and /config/brokers (credentials, dynamic configs), which others cannot read.
ZooKeeper SASL is not offered: kazoo needs the pure-sasl package for it.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Mapping
from typing import Any

from kazoo.client import KazooClient
from kazoo.handlers.threading import SequentialThreadingHandler
from kazoo.security import CREATOR_ALL_ACL, READ_ACL_UNSAFE

from samsa.config.schema import ConfigError

from .security import tls

SENSITIVE_ROOTS = ("/config/users", "/config/brokers", "/delegation_token")
_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


class _StoreOptions:
    """The `zookeeper.ssl.*` store properties under the `ssl.*` names security/tls.py reads
    (its errors then name the zookeeper property)."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self._values = {
            "ssl.keystore.location": config["zookeeper.ssl.keystore.location"],
            "ssl.keystore.password": config["zookeeper.ssl.keystore.password"],
            "ssl.keystore.type": config["zookeeper.ssl.keystore.type"],
            "ssl.truststore.location": config["zookeeper.ssl.truststore.location"],
            "ssl.truststore.password": config["zookeeper.ssl.truststore.password"],
            "ssl.truststore.type": config["zookeeper.ssl.truststore.type"],
        }
        for store in ("keystore", "truststore"):
            # ZooKeeper's rule: an unset type follows the file's extension
            location = self._values[f"ssl.{store}.location"] or ""
            if location.lower().endswith(".jks"):
                raise ConfigError.invalid(self.key(f"ssl.{store}.location"), location,
                                          "JKS stores are not read: use PEM or PKCS12")
            if self._values[f"ssl.{store}.type"] is None:
                self._values[f"ssl.{store}.type"] = (
                    "PKCS12" if location.lower().endswith((".p12", ".pfx")) else "PEM")

    def key(self, name: str) -> str:
        return "zookeeper." + name

    def __getitem__(self, name: str) -> Any:
        # inline PEM (ssl.keystore.key, ...) has no zookeeper.* property
        return self._values.get(name)


def tls_context(config: Mapping[str, Any]) -> ssl.SSLContext | None:
    """The client SSLContext for ZooKeeper, None when zookeeper.ssl.client.enable is false;
    ConfigError when a store is missing or unreadable."""
    if not config["zookeeper.ssl.client.enable"]:
        return None
    opts = _StoreOptions(config)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    newest = config["zookeeper.ssl.protocol"]
    enabled = config["zookeeper.ssl.enabled.protocols"] or [
        v for v in ("TLSv1.2", "TLSv1.3") if newest != "TLSv1.2" or v == "TLSv1.2"]
    versions = sorted(_VERSIONS[v] for v in enabled)
    if not versions:
        raise ConfigError.invalid("zookeeper.ssl.enabled.protocols", "", "No TLS version enabled")
    ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]
    ciphers = config["zookeeper.ssl.cipher.suites"]
    if ciphers:
        try:
            ctx.set_ciphers(":".join(ciphers))
        except ssl.SSLError as exc:
            raise ConfigError.invalid("zookeeper.ssl.cipher.suites", ",".join(ciphers),
                                      str(exc)) from None
    tls._load_truststore(ctx, opts, ssl.Purpose.SERVER_AUTH)
    algorithm = config["zookeeper.ssl.endpoint.identification.algorithm"] or ""
    ctx.check_hostname = algorithm.upper() == "HTTPS"
    ctx.verify_mode = ssl.CERT_REQUIRED
    if config["zookeeper.ssl.keystore.location"]:
        tls._load_keystore(ctx, opts)
    return ctx


class _TlsHandler(SequentialThreadingHandler):
    """kazoo's threading handler whose connections are wrapped in our SSLContext (kazoo's own
    TLS option offers no versions, PKCS12 or in-memory keys). The last failure is kept for the
    error a broker that cannot connect reports."""

    def __init__(self, context: ssl.SSLContext) -> None:
        super().__init__()
        self.context = context
        self.last_error: str | None = None

    def create_connection(self, address: Any, hostname: str | None = None,
                          timeout: float | None = None, **_: Any) -> ssl.SSLSocket:
        host, port = address[0], address[1]
        try:
            sock = socket.create_connection((host, port), timeout)
        except OSError as exc:
            self.last_error = f"connecting to {host}:{port} failed: {exc}"
            raise
        try:
            conn = self.context.wrap_socket(sock, server_hostname=hostname or host)
        except (OSError, ssl.SSLError) as exc:
            sock.close()
            self.last_error = f"the TLS handshake with ZooKeeper at {host}:{port} failed: {exc}"
            raise
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.last_error = None
        return conn


class _SecureAclClient(KazooClient):
    """Creates znodes with Kafka's secure ACLs (zookeeper.set.acl=true)."""

    def create_async(self, path: str, value: bytes = b"", acl: Any = None,
                     *args: Any, **kwargs: Any) -> Any:
        if acl is None or acl == self.default_acl:
            acl = secure_acls(path)
        return super().create_async(path, value, acl, *args, **kwargs)


def secure_acls(path: str) -> list[Any]:
    """Kafka's ACLs of a znode when zookeeper.set.acl is true."""
    sensitive = any(path == root or path.startswith(root + "/") for root in SENSITIVE_ROOTS)
    return list(CREATOR_ALL_ACL) + ([] if sensitive else list(READ_ACL_UNSAFE))


class ZkClientSettings:
    """What every KazooClient of this broker is made with."""

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        self.context = tls_context(config) if config is not None else None
        self.secure_acls = bool(config is not None and config["zookeeper.set.acl"])
        if self.secure_acls and not (self.context is not None
                                     and config is not None
                                     and config["zookeeper.ssl.keystore.location"]):
            # Kafka refuses this too: without an authenticated identity the ACLs protect nothing
            raise ConfigError("zookeeper.set.acl", "zookeeper.set.acl is true, but the ZooKeeper "
                              "client has no identity: set zookeeper.ssl.client.enable and "
                              "zookeeper.ssl.keystore.location (mutual TLS)")
        self._handlers: list[_TlsHandler] = []

    def client(self, hosts: str, **kwargs: Any) -> KazooClient:
        if self.context is not None:
            handler = _TlsHandler(self.context)
            self._handlers.append(handler)
            kwargs.update(handler=handler, use_ssl=True)
        if self.secure_acls:
            return _SecureAclClient(hosts=hosts, default_acl=secure_acls("/"), **kwargs)
        return KazooClient(hosts=hosts, **kwargs)

    def last_error(self) -> str | None:
        """Why the last TLS connection attempt failed, if it did."""
        for handler in reversed(self._handlers):
            if handler.last_error:
                return handler.last_error
        return None
