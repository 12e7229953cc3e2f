"""TLS for SSL and SASL_SSL listeners from Kafka's `ssl.*` properties (each may be overridden
per listener as `listener.name.<listener>.ssl.*`), and the principal of a client certificate.

Key and trust stores are PEM (a file holding the private key and the certificate chain, or both
inline as ssl.keystore.key and ssl.keystore.certificate.chain) or PKCS12 (read with the
`cryptography` package and handed to Python's ssl in memory). JKS is not read.
"""

from __future__ import annotations

import os
import re
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from samsa.config.schema import ConfigError


class DirectSSLObject(ssl.SSLObject):
    """ssl.SSLObject with its read, write and pending bound to the C object's own methods,
    which ssl.SSLObject's wrap in a Python function each. The event loop's SSL transport calls
    read and pending once per TLS record it decrypts, and clients send small records
    (librdkafka one per buffer segment: some 460 a MB of 1 KiB records), so the wrappers' frames
    were a measurable part of a TLS Produce's cost. Same arguments, results and exceptions."""

    @classmethod
    def _create(cls, *args: Any, **kwargs: Any) -> DirectSSLObject:
        obj: DirectSSLObject = super()._create(*args, **kwargs)  # type: ignore[misc]
        inner = obj._sslobj  # type: ignore[attr-defined]
        vars(obj).update(read=inner.read, write=inner.write, pending=inner.pending)
        return obj


def _direct(ctx: ssl.SSLContext) -> ssl.SSLContext:
    ctx.sslobject_class = DirectSSLObject  # what wrap_bio returns (an event loop's transport)
    return ctx


_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
                "required": ssl.CERT_REQUIRED}


def server_context(config: Any, listener: str, sasl: bool = False) -> ssl.SSLContext:
    """The server-side SSLContext of one listener (`sasl`: a SASL_SSL one); ConfigError when
    the stores are missing or unreadable."""
    opts = config.for_listener(listener)
    ctx = _direct(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER))
    versions = sorted(_VERSIONS[v] for v in opts["ssl.enabled.protocols"])
    if not versions:
        raise ConfigError.invalid(opts.key("ssl.enabled.protocols"), "", "No TLS version enabled")
    ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]
    if opts["ssl.protocol"] == "TLSv1.2":
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    ciphers = opts["ssl.cipher.suites"]
    if ciphers:
        try:
            ctx.set_ciphers(":".join(ciphers))
        except ssl.SSLError as exc:
            raise ConfigError.invalid(opts.key("ssl.cipher.suites"), ",".join(ciphers),
                                      str(exc)) from None
    if opts["ssl.principal.mapping.rules"] != "DEFAULT":  # the validator allows only DEFAULT
        raise ConfigError.invalid(opts.key("ssl.principal.mapping.rules"),
                                  opts["ssl.principal.mapping.rules"], "Only DEFAULT")
    _load_keystore(ctx, opts)
    _load_truststore(ctx, opts)
    client_auth = opts["ssl.client.auth"]
    if sasl:
        # Kafka (KIP-684): on SASL_SSL only the listener's own ssl.client.auth counts.
        client_auth = opts.override("ssl.client.auth") or "none"
    ctx.verify_mode = _CLIENT_AUTH[client_auth]
    return ctx


def client_context(config: Any, listener: str) -> ssl.SSLContext:
    """The client-side SSLContext with which this broker connects to another's listener (the
    inter-broker one): the listener's trust store verifies the peer (and its host name when
    ssl.endpoint.identification.algorithm is https), the listener's key store, if any, is
    presented for mutual TLS."""
    opts = config.for_listener(listener)
    ctx = _direct(ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT))
    versions = sorted(_VERSIONS[v] for v in opts["ssl.enabled.protocols"])
    if versions:
        ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]
    if opts["ssl.protocol"] == "TLSv1.2":
        ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    ciphers = opts["ssl.cipher.suites"]
    if ciphers:
        ctx.set_ciphers(":".join(ciphers))
    _load_truststore(ctx, opts, ssl.Purpose.SERVER_AUTH)
    ctx.check_hostname = (opts["ssl.endpoint.identification.algorithm"] or "").lower() == "https"
    ctx.verify_mode = ssl.CERT_REQUIRED
    if opts["ssl.keystore.location"] or opts["ssl.keystore.key"]:
        _load_keystore(ctx, opts)
    return ctx


class ListenerTls:
    """The TLS context of one SSL or SASL_SSL listener as it changes while the broker runs
    (Kafka's SslFactory): the key and trust stores (listener.name.<listener>.ssl.keystore.*,
    ssl.truststore.*) are re-read when their configs change or their files were modified, and
    the new context serves new connections only. `prepare` checks a configuration as Kafka's
    validateReconfiguration does: the stores must load, a key store must keep its subject
    distinguished name (unless ssl.allow.dn.changes) and subject alternative names (unless
    ssl.allow.san.changes), and a store cannot be added to or removed from the listener."""

    def __init__(self, config: Any, listener: str, sasl: bool, context: ssl.SSLContext,
                 inter_broker: bool = False) -> None:
        self.listener = listener
        self.sasl = sasl
        self.context = context
        # Kafka's keystoreVerifiableUsingTruststore: on the inter-broker listener a new key
        # store must be trusted by the current trust store and the other way round (checked
        # by TLS handshakes in memory), lest the brokers stop reaching each other.
        self._client = _validation_client(config, listener) if inter_broker else None
        opts = config.for_listener(listener)
        self._signature = _store_signature(opts)
        self._leaf = _keystore_leaf(opts)
        self._has_truststore = _has_truststore(opts)

    def prepare(self, config: Any) -> _Rebuilt | None:
        """The new context `config` gives this listener (None: nothing to rebuild); raises
        ConfigError with Kafka's reason."""
        opts = config.for_listener(self.listener)
        signature = _store_signature(opts)
        if signature == self._signature:
            return None
        context = server_context(config, self.listener, self.sasl)
        leaf = _keystore_leaf(opts)
        prefix = "Validation of dynamic config update of SSLFactory failed: " \
                 "org.apache.kafka.common.config.ConfigException: "
        key = opts.key("ssl.keystore.location")
        if self._leaf is not None and leaf is not None:
            if not opts["ssl.allow.dn.changes"] and not _same_dn(leaf, self._leaf):
                raise ConfigError(key, f"{prefix}Keystore DistinguishedName does not match:  "
                                  f"existing={{alias={_ALIAS}, DN={_dn(self._leaf)}}}, "
                                  f"new={{alias={_ALIAS}, DN={_dn(leaf)}}}")
            old_sans, new_sans = _sans(self._leaf), _sans(leaf)
            if not opts["ssl.allow.san.changes"] and not old_sans <= new_sans:
                raise ConfigError(key, f"{prefix}Keystore SubjectAltNames do not match:  "
                                  f"existing={{alias={_ALIAS}, SAN={_show(old_sans)}}}, "
                                  f"new={{alias={_ALIAS}, SAN={_show(new_sans)}}}")
        has_truststore = _has_truststore(opts)
        if not self._has_truststore and has_truststore:
            raise ConfigError(opts.key("ssl.truststore.location"), f"{prefix}Cannot add SSL "
                              "truststore to an existing listener for which no truststore was "
                              "configured.")
        client = None
        if self._client is not None:
            client = _validation_client(config, self.listener)
            try:
                _handshake(self.context, client)
                _handshake(context, self._client)
            except ssl.SSLError as exc:
                raise ConfigError(key, "Validation of dynamic config update of SSLFactory "
                                  f"failed: javax.net.ssl.SSLHandshakeException: {exc}") from None
        return _Rebuilt(context, signature, leaf, has_truststore, client)

    def apply(self, rebuilt: _Rebuilt) -> None:
        self.context = rebuilt.context
        if rebuilt.client is not None:
            self._client = rebuilt.client
        self._signature, self._leaf = rebuilt.signature, rebuilt.leaf
        self._has_truststore = rebuilt.has_truststore


@dataclass(frozen=True)
class _Rebuilt:
    context: ssl.SSLContext
    signature: tuple[object, ...]
    leaf: Any
    has_truststore: bool
    client: ssl.SSLContext | None = None


def _validation_client(config: Any, listener: str) -> ssl.SSLContext:
    """The listener's client side (its trust store, its key store for mutual TLS) without
    the host name check, as Kafka's validation engines are made."""
    ctx = client_context(config, listener)
    ctx.check_hostname = False
    return ctx


def _handshake_step(side: ssl.SSLObject) -> bool:
    """One step of a side's handshake: True once it is done, False while it awaits the peer."""
    try:
        side.do_handshake()
    except ssl.SSLWantReadError:
        return False
    return True


def _handshake(server: ssl.SSLContext, client: ssl.SSLContext) -> None:
    """A TLS handshake between two contexts in memory; ssl.SSLError if it fails."""
    c_in, c_out, s_in, s_out = (ssl.MemoryBIO() for _ in range(4))
    c = client.wrap_bio(c_in, c_out, server_side=False)
    s = server.wrap_bio(s_in, s_out, server_side=True)
    done_c = done_s = False
    for _ in range(16):
        done_c = done_c or _handshake_step(c)
        s_in.write(c_out.read())
        done_s = done_s or _handshake_step(s)
        c_in.write(s_out.read())
        if done_c and done_s:
            # TLS 1.3: the client learns of a refused certificate only on its next read
            c_in.write(s_out.read())
            try:
                c.read(1)
            except (ssl.SSLWantReadError, ssl.SSLZeroReturnError):
                pass
            return
    raise ssl.SSLError("the validation handshake did not complete")


_ALIAS = "kafka"  # the alias of the one entry of Kafka's PEM key stores
_STORE_CONFIGS = ("ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password",
                  "ssl.key.password", "ssl.keystore.certificate.chain", "ssl.keystore.key",
                  "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
                  "ssl.truststore.certificates")
_PEM_CERT = re.compile(rb"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", re.DOTALL)


def _store_signature(opts: Any) -> tuple[object, ...]:
    """What the context is built from: the store configs and the files' modification times
    (Kafka's SslEngineFactory.shouldBeRebuilt)."""
    def mtime(location: str | None) -> int | None:
        try:
            return os.stat(location).st_mtime_ns if location else None
        except OSError:
            return None
    return (*(opts[n] for n in _STORE_CONFIGS), mtime(opts["ssl.keystore.location"]),
            mtime(opts["ssl.truststore.location"]))


def _has_truststore(opts: Any) -> bool:
    return bool(opts["ssl.truststore.location"] or opts["ssl.truststore.certificates"])


def _keystore_leaf(opts: Any) -> Any:
    """The certificate of the key store's key (a cryptography x509.Certificate), None without
    a key store."""
    from cryptography import x509

    location = opts["ssl.keystore.location"]
    try:
        if location and opts["ssl.keystore.type"] == "PKCS12":
            from cryptography.hazmat.primitives.serialization import pkcs12
            password = opts["ssl.keystore.password"]
            _, cert, _ = pkcs12.load_key_and_certificates(
                Path(location).read_bytes(), password.encode() if password else None)
            return cert
        if location:
            data = Path(location).read_bytes()
        elif opts["ssl.keystore.certificate.chain"]:
            data = opts["ssl.keystore.certificate.chain"].encode()
        else:
            return None
        m = _PEM_CERT.search(data)
        return None if m is None else x509.load_pem_x509_certificate(m.group(0))
    except (OSError, ValueError) as exc:
        raise ConfigError.invalid(opts.key("ssl.keystore.location"), location or "(inline PEM)",
                                  f"Failed to load the key store: {exc}") from None


def _dn(cert: Any) -> str:
    return str(cert.subject.rfc4514_string())


def _same_dn(a: Any, b: Any) -> bool:
    return bool(a.subject == b.subject or _dn(a).lower() == _dn(b).lower())


def _sans(cert: Any) -> set[Any]:
    from cryptography import x509

    try:
        ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except x509.ExtensionNotFound:
        return set()
    return set(ext.value)


def _show(sans: set[Any]) -> str:
    return "[" + ", ".join(sorted(str(getattr(n, "value", n)) for n in sans)) + "]"


def _load_keystore(ctx: ssl.SSLContext, opts: Any) -> None:
    location = opts["ssl.keystore.location"]
    chain, private_key = opts["ssl.keystore.certificate.chain"], opts["ssl.keystore.key"]
    password = opts["ssl.key.password"] or opts["ssl.keystore.password"]
    try:
        if location and opts["ssl.keystore.type"] == "PKCS12":
            pem = _pkcs12_key_store(Path(location).read_bytes(), opts["ssl.keystore.password"])
            _load_pem_chain(ctx, pem, None)
        elif location:
            ctx.load_cert_chain(location, password=password)
        elif chain and private_key:
            _load_pem_chain(ctx, f"{private_key.strip()}\n{chain.strip()}\n".encode(), password)
        else:
            raise ConfigError(opts.key("ssl.keystore.location"), "An SSL listener needs a key "
                              "store: ssl.keystore.location, or ssl.keystore.key and "
                              "ssl.keystore.certificate.chain")
    except (OSError, ssl.SSLError, ValueError) as exc:
        raise ConfigError.invalid(opts.key("ssl.keystore.location"),
                                  location or "(inline PEM)",
                                  f"Failed to load the key store: {exc}") from None


def _load_truststore(ctx: ssl.SSLContext, opts: Any,
                     purpose: ssl.Purpose = ssl.Purpose.CLIENT_AUTH) -> None:
    location, certificates = opts["ssl.truststore.location"], opts["ssl.truststore.certificates"]
    try:
        if location and opts["ssl.truststore.type"] == "PKCS12":
            ctx.load_verify_locations(cadata=_pkcs12_certificates(
                Path(location).read_bytes(), opts["ssl.truststore.password"]))
        elif location:
            ctx.load_verify_locations(cafile=location)
        elif certificates:
            ctx.load_verify_locations(cadata=certificates)
        else:
            ctx.load_default_certs(purpose)
    except (OSError, ssl.SSLError, ValueError) as exc:
        raise ConfigError.invalid(opts.key("ssl.truststore.location"),
                                  location or "(inline PEM)",
                                  f"Failed to load the trust store: {exc}") from None


def _load_pem_chain(ctx: ssl.SSLContext, pem: bytes, password: str | None) -> None:
    """ssl loads a key and chain only from a file: an anonymous in-memory one (memfd) where
    the system has it, else a private temporary file removed at once."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("samsa-keystore", os.MFD_CLOEXEC)
        try:
            os.write(fd, pem)
            ctx.load_cert_chain(f"/proc/self/fd/{fd}", password=password)
        finally:
            os.close(fd)
        return
    fd, path = tempfile.mkstemp(prefix="samsa-keystore-", suffix=".pem")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(pem)
        ctx.load_cert_chain(path, password=password)
    finally:
        os.unlink(path)


def _pkcs12_key_store(data: bytes, password: str | None) -> bytes:
    """A PKCS12 key store's private key and certificate chain as PEM (in memory)."""
    from cryptography.hazmat.primitives.serialization import (
        Encoding,
        NoEncryption,
        PrivateFormat,
        pkcs12,
    )

    key, cert, extra = pkcs12.load_key_and_certificates(
        data, password.encode() if password else None)
    if key is None or cert is None:
        raise ValueError("the PKCS12 key store holds no private key with its certificate")
    pem = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
    return pem + b"".join(c.public_bytes(Encoding.PEM) for c in [cert, *extra])


def _pkcs12_certificates(data: bytes, password: str | None) -> str:
    """A PKCS12 trust store's certificates as PEM."""
    from cryptography.hazmat.primitives.serialization import Encoding, pkcs12

    _, cert, extra = pkcs12.load_key_and_certificates(
        data, password.encode() if password else None)
    certs = [c for c in [cert, *extra] if c is not None]
    if not certs:
        raise ValueError("the PKCS12 trust store holds no certificate")
    return "".join(c.public_bytes(Encoding.PEM).decode() for c in certs)


# X500Principal.getName(RFC2253) keyword names; other attributes are written OID=#hex.
_RFC2253_NAMES = {
    "commonName": "CN", "countryName": "C", "localityName": "L",
    "stateOrProvinceName": "ST", "organizationName": "O", "organizationalUnitName": "OU",
    "streetAddress": "STREET", "domainComponent": "DC", "userId": "UID",
}
_OIDS = {"emailAddress": "1.2.840.113549.1.9.1", "serialNumber": "2.5.4.5",
         "title": "2.5.4.12", "givenName": "2.5.4.42", "surname": "2.5.4.4"}


def _escape(text: str) -> str:
    out = "".join("\\" + c if c in ',+"\\<>;' else c for c in text)
    if out.startswith((" ", "#")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out


def _attribute(name: str, text: str) -> str:
    short = _RFC2253_NAMES.get(name)
    if short is not None:
        return f"{short}={_escape(text)}"
    # Java writes other attributes as their OID and the DER value in hex (an IA5String
    # for emailAddress, a PrintableString otherwise).
    oid = _OIDS.get(name, name)
    raw = text.encode()
    tag = 0x16 if name == "emailAddress" else 0x13
    return f"{oid}=#{bytes([tag, len(raw)]).hex()}{raw.hex()}" if len(raw) < 128 \
        else f"{oid}={_escape(text)}"


def subject_dn(peercert: dict[str, Any]) -> str:
    """A verified peer certificate's subject as X500Principal.getName() writes it (RFC 2253:
    the most specific name first, e.g. CN=alice,OU=eng,O=example,C=US) — the principal name
    Kafka's DEFAULT ssl.principal.mapping.rules keeps."""
    rdns = peercert.get("subject", ())
    return ",".join(
        "+".join(_attribute(name, text) for name, text in rdn) for rdn in reversed(rdns)
    )
