"""The broker's ZooKeeper client (kazoo) made from Kafka's `zookeeper.*` client properties.

TLS (`zookeeper.ssl.client.enable`): one SSLContext is built from the `zookeeper.ssl.*` key
and trust stores (PEM or PKCS12, read in memory as for the listeners, see security/tls.py),
versions, cipher suites and host-name check, and every connection kazoo opens (sessions, the
chroot's creation, four-letter words) is wrapped with it. `zookeeper.clientCnxnSocket` (Java's
Netty switch) is accepted and not needed; `zookeeper.ssl.crl.enable` and `.ocsp.enable` are
accepted, revocation is not checked.

SASL, as Kafka's ZooKeeper client did it: the JAAS file named by
`java.security.auth.login.config` (a broker property here; unset, the
`-Djava.security.auth.login.config=...` of the KAFKA_OPTS environment variable, where Kafka's
users put it) holds the login in its `zookeeper.sasl.clientconfig` section (`Client`); with
that section every session authenticates with SASL DIGEST-MD5 (pure-sasl, through kazoo's
`sasl_options`) as the module's `username`/`password`. `zookeeper.sasl.client` and
`zookeeper.sasl.clientconfig` are read the same way (property, else KAFKA_OPTS, else Kafka's
default). Kerberos (Krb5LoginModule, GSSAPI) is refused at start-up: it is not supported.

`zookeeper.set.acl=true` creates every znode with Kafka's secure ACLs (ZkData.defaultAcls): all
rights for the creator's authenticated identities (`sasl:<username>`; over mutual TLS,
ZooKeeper's x509 identity: the client certificate's subject), read for anyone, except under
the sensitive roots /config/users and /config/brokers (credentials, dynamic configs), which
others cannot read.
"""

from __future__ import annotations

import logging
import os
import shlex
import socket
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import (
    AuthFailedError,
    ConnectionDropped,
    KazooException,
    SessionClosedRequireSaslError,
)
from kazoo.handlers.threading import SequentialThreadingHandler
from kazoo.security import CREATOR_ALL_ACL, READ_ACL_UNSAFE

from samsa.config.schema import BrokerConfig, ConfigError

from ...security import jaas, tls

log = logging.getLogger(__name__)

SENSITIVE_ROOTS = ("/config/users", "/config/brokers", "/delegation_token")
_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


class _StoreOptions:
    """The `zookeeper.ssl.*` store properties under the `ssl.*` names security/tls.py reads
    (its errors then name the zookeeper property)."""

    def __init__(self, config: BrokerConfig) -> None:
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


def tls_context(config: BrokerConfig) -> ssl.SSLContext | None:
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


# Kafka's JaasUtils: the ZooKeeper client's JVM system properties and their defaults
SASL_CLIENT = "zookeeper.sasl.client"
SASL_CLIENTCONFIG = "zookeeper.sasl.clientconfig"
DEFAULT_CONTEXT = "Client"
_KERBEROS_MODULES = ("com.sun.security.auth.module.Krb5LoginModule",
                     "com.ibm.security.auth.module.Krb5LoginModule")


def jvm_system_properties(kafka_opts: str) -> dict[str, str]:
    """The `-Dname=value` options of a KAFKA_OPTS value (`-Dname` alone: the empty string)."""
    try:
        args = shlex.split(kafka_opts)
    except ValueError as exc:
        raise ConfigError("KAFKA_OPTS", f"KAFKA_OPTS cannot be split into options: {exc}") \
            from None
    out: dict[str, str] = {}
    for arg in args:
        if arg.startswith("-D") and len(arg) > 2:
            name, _, value = arg[2:].partition("=")
            out[name] = value
    return out


@dataclass(frozen=True)
class ZkSaslLogin:
    """The broker's SASL login to ZooKeeper, from a JAAS login context."""

    username: str
    password: str = field(repr=False)
    context: str
    jaas_file: str
    mechanism: str = "DIGEST-MD5"

    def sasl_options(self) -> dict[str, str]:
        """kazoo's `sasl_options` (a new dict: kazoo adds to it)."""
        return {"mechanism": self.mechanism, "username": self.username,
                "password": self.password}

    def describe(self) -> str:
        return (f"SASL {self.mechanism} as {self.username!r} (login context {self.context!r} "
                f"of {self.jaas_file})")


def sasl_login(config: BrokerConfig,
               environ: Mapping[str, str] | None = None) -> ZkSaslLogin | None:
    """The SASL login to ZooKeeper that these settings (and KAFKA_OPTS of `environ`, the
    process's environment by default) describe, None when there is none; ConfigError for a
    JAAS file that is missing, malformed or asks for what is not supported."""
    system: dict[str, str] | None = None
    values = {jaas.LOGIN_CONFIG: config["java.security.auth.login.config"],
              SASL_CLIENT: config["zookeeper.sasl.client"],
              SASL_CLIENTCONFIG: config["zookeeper.sasl.clientconfig"]}

    def setting(name: str) -> Any:
        nonlocal system
        if not config.is_default(name):
            return values[name]
        if system is None:
            env = os.environ if environ is None else environ
            system = jvm_system_properties(env.get("KAFKA_OPTS", ""))
        if name in system:
            value: Any = system[name]
            # Java's Boolean.parseBoolean: "true" in any case, anything else is false
            return value.lower() == "true" if name == SASL_CLIENT else value
        return values[name]

    path = setting(jaas.LOGIN_CONFIG)
    context = setting(SASL_CLIENTCONFIG)
    enabled = setting(SASL_CLIENT)
    if not path:
        return None
    modules = jaas.read(path).get(context)
    if modules is None:
        if context != DEFAULT_CONTEXT:
            log.warning("The JAAS file %s has no login context %r (%s): the ZooKeeper client "
                        "does not use SASL", path, context, SASL_CLIENTCONFIG)
        return None
    if not enabled:
        # Kafka's JaasUtils.isZkSaslEnabled refuses this too
        raise ConfigError(SASL_CLIENT, f"The JAAS file {path} has the ZooKeeper login context "
                          f"{context!r}, but {SASL_CLIENT} is false, which disables SASL in the "
                          f"ZooKeeper client: remove the section or set {SASL_CLIENT} to true")
    for module in modules:
        if module.name in _KERBEROS_MODULES or module.name.endswith(".Krb5LoginModule"):
            raise ConfigError(jaas.LOGIN_CONFIG, f"The ZooKeeper login context {context!r} of "
                              f"{path} uses {module.name} (SASL GSSAPI, Kerberos): not "
                              "supported; Samsa authenticates to ZooKeeper with DIGEST-MD5 "
                              "only (org.apache.zookeeper.server.auth.DigestLoginModule "
                              "required username=\"...\" password=\"...\";)")
    for module in modules:
        if "username" in module.options and "password" in module.options:
            return ZkSaslLogin(module.options["username"], module.options["password"],
                               context, path)
    raise ConfigError(jaas.LOGIN_CONFIG, f"The ZooKeeper login context {context!r} of {path} "
                      "has no login module with username and password options "
                      "(org.apache.zookeeper.server.auth.DigestLoginModule required "
                      "username=\"...\" password=\"...\";)")


def secure_acls(path: str) -> list[Any]:
    """Kafka's ACLs of a znode when zookeeper.set.acl is true."""
    sensitive = any(path == root or path.startswith(root + "/") for root in SENSITIVE_ROOTS)
    return list(CREATOR_ALL_ACL) + ([] if sensitive else list(READ_ACL_UNSAFE))


class _Client(KazooClient):
    """kazoo's client, creating znodes with Kafka's secure ACLs (zookeeper.set.acl=true), and
    ending a session whose first SASL login ZooKeeper refuses as kazoo ends one it cannot
    authenticate (state AUTH_FAILED, AuthFailedError for every request); `settings` keeps why.
    A login refused after one succeeded (a connection dropped mid-login counts as refused)
    does not end the client: as Kafka's ZooKeeperClient does once initialized, it keeps
    trying, a session expired meanwhile replaced by a new one."""

    def __init__(self, settings: ZkClientSettings, **kwargs: Any) -> None:
        self._secure = settings.secure_acls
        if self._secure:
            kwargs["default_acl"] = secure_acls("/")
        if settings.sasl is not None:
            kwargs["sasl_options"] = settings.sasl.sasl_options()
        super().__init__(**kwargs)
        if settings.sasl is not None:
            self._guard_sasl(settings)

    def _guard_sasl(self, settings: ZkClientSettings) -> None:
        connection = self._connection
        authenticate = connection._authenticate_with_sasl
        assert settings.sasl is not None
        login = settings.sasl.describe()
        logged_in = False

        def refused(why: str) -> Exception:
            settings.sasl_error = why
            if not logged_in:
                return AuthFailedError(why)
            log.warning("%s; trying again", why)
            return ConnectionDropped(why)  # kazoo reconnects (with its backoff)

        def guarded(host: str, timeout: float) -> None:
            nonlocal logged_in
            try:
                authenticate(host, timeout)
            except AuthFailedError as exc:
                # the connection closed during the exchange (ZooKeeper not requiring SASL
                # closes it so on a wrong password), or pure-sasl failed
                cause = exc.__cause__ or exc
                raise refused(f"ZooKeeper refused the {login}: {cause}") from exc
            except KazooException as exc:
                # ZooKeeper's error answer to a SASL token (SessionClosedRequireSasl, -124,
                # where it requires SASL): kazoo would let its connection thread die of it
                raise refused(f"ZooKeeper refused the {login} ({type(exc).__name__}): a "
                              "wrong username or password, or a user its JAAS Server section "
                              "lacks") from exc
            except self.handler.timeout_exception:
                raise  # kazoo's connection loop tries again
            except Exception as exc:
                # e.g. kazoo's RuntimeError for an answer whose xid is not the login's: an
                # exchange that went wrong, not a verdict on the password
                raise refused(f"the {login} failed ({type(exc).__name__}: {exc})") from exc
            settings.sasl_error = None
            logged_in = True

        connection._authenticate_with_sasl = guarded

    def create_async(self, path: str, value: bytes = b"", acl: Any = None,
                     *args: Any, **kwargs: Any) -> Any:
        if self._secure and (acl is None or acl == self.default_acl):
            acl = secure_acls(path)
        return super().create_async(path, value, acl, *args, **kwargs)


def _keep_connecting(client: KazooClient) -> None:
    """kazoo's connection thread ends on an exception its loop does not expect: the session is
    then lost (LOST) and never replaced, and the broker's registration is gone for good while
    it goes on serving. Run the loop again instead (as a new session, like after an expiry),
    as ZooKeeper's own client never stops trying until it is closed."""
    connection = client._connection
    zk_loop = connection.zk_loop

    def resilient_loop() -> None:
        while True:
            try:
                zk_loop()
                return  # stopped: client.stop(), or a first login refused
            except Exception:
                if client._stopped.is_set():
                    raise
                log.exception("The ZooKeeper connection loop failed: connecting again, with a "
                              "new session")
                client._stopped.wait(1.0)

    connection.zk_loop = resilient_loop


class ZkClientSettings:
    """What every KazooClient of this broker is made with."""

    def __init__(self, config: BrokerConfig | None = None,
                 environ: Mapping[str, str] | None = None) -> None:
        """`environ`: where KAFKA_OPTS is read (the process's environment by default)."""
        self.context = tls_context(config) if config is not None else None
        self.sasl = sasl_login(config, environ) if config is not None else None
        self.secure_acls = bool(config is not None and config["zookeeper.set.acl"])
        mtls = (self.context is not None and config is not None
                and config["zookeeper.ssl.keystore.location"])
        if self.secure_acls and not (mtls or self.sasl is not None):
            # Kafka refuses this too: without an authenticated identity the ACLs protect nothing
            raise ConfigError("zookeeper.set.acl", "zookeeper.set.acl is true, but the ZooKeeper "
                              "client has no identity: give it a SASL login (the JAAS file of "
                              f"{jaas.LOGIN_CONFIG} with a {SASL_CLIENTCONFIG} section, Client) "
                              "or set zookeeper.ssl.client.enable and "
                              "zookeeper.ssl.keystore.location (mutual TLS)")
        if self.sasl is not None:
            log.info("ZooKeeper client login: %s", self.sasl.describe())
        self._handlers: list[_TlsHandler] = []
        self.sasl_error: str | None = None  # why ZooKeeper last refused the SASL login

    def client(self, hosts: str, **kwargs: Any) -> KazooClient:
        if self.context is not None:
            handler = _TlsHandler(self.context)
            self._handlers.append(handler)
            kwargs.update(handler=handler, use_ssl=True)
        # Reconnect at least every second, as ZooKeeper's own client does; kazoo's backoff
        # grows to an hour while ZooKeeper is away or refuses the login, for the connection
        # and for its watch recipes' reads (which fail at each refused login).
        kwargs.setdefault("connection_retry", {"max_tries": -1, "max_delay": 1.0})
        kwargs.setdefault("command_retry", {"max_tries": -1, "max_delay": 1.0})
        if self.secure_acls or self.sasl is not None:
            client: KazooClient = _Client(self, hosts=hosts, **kwargs)
        else:
            client = KazooClient(hosts=hosts, **kwargs)
        _keep_connecting(client)
        return client

    def last_error(self) -> str | None:
        """Why the last TLS connection attempt failed, if it did."""
        for handler in reversed(self._handlers):
            if handler.last_error:
                return handler.last_error
        return None

    def auth_failure(self, exc: KazooException) -> str:
        """Why a session could not authenticate (AuthFailedError, or ZooKeeper closing one
        without SASL where it requires SASL)."""
        if self.sasl_error:
            return self.sasl_error
        if isinstance(exc, SessionClosedRequireSaslError):
            return ("ZooKeeper requires SASL authentication and the broker has no SASL login "
                    f"(a JAAS file, {jaas.LOGIN_CONFIG}, with a {SASL_CLIENTCONFIG} section)"
                    if self.sasl is None else
                    f"ZooKeeper requires SASL authentication and refused the "
                    f"{self.sasl.describe()}")
        return f"authentication failed ({type(exc).__name__})"
