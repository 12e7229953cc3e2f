"""A small blocking Kafka client for the admin commands.

Why not a client library: the requests are encoded by the project's own codecs
(protocol/codec.py over kio's generated types, which already know every API the commands use,
KIP-848 consumer groups and share groups included), so `samsa topic list` needs nothing beyond
the wheel's own dependencies: no librdkafka (confluent-kafka) and no JVM. A command sends a
handful of requests one after the other, so one blocking socket per broker is all it needs.

Security settings use the names of librdkafka and Kafka's tools: `security.protocol`
(PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL), `sasl.mechanism` (PLAIN, SCRAM-SHA-256,
SCRAM-SHA-512), `sasl.username` / `sasl.password` (or a `sasl.jaas.config` with username and
password), `ssl.ca.location`, `ssl.certificate.location` / `ssl.key.location` (client
certificate) and `ssl.endpoint.identification.algorithm` (empty: no host name check).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
import socket
import ssl
import struct
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from samsa.protocol.codec import UnknownVersion, build, encode, reader, request_type, response_type
from samsa.protocol.errors import ErrorCode

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
CLIENT_ID = b"samsa-admin"
GROUP_KEY, TXN_KEY = 0, 1  # FindCoordinator key types
# Newest versions whose field names the commands read (a newer version renames or drops them).
# OffsetFetch v10, OffsetCommit v10, Produce v13 and Fetch v13 name topics by id only;
# AddPartitionsToTxn v4+ is for brokers.
VERSION_CAPS = {9: 9, 8: 9, 0: 12, 1: 12, 24: 3}


class AdminError(Exception):
    """A failure to report to the user: Kafka's error name (or a short kind) and a message."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"{name}: {message}" if message else name)
        self.name = name
        self.message = message


class KafkaRequestError(AdminError):
    """A broker answered with an error code."""

    def __init__(self, code: int, message: str | None = None) -> None:
        self.code = ErrorCode(code)
        super().__init__(error_name(code), message or "")


def error_name(code: int) -> str:
    """Kafka's spelling of an error code: TOPIC_ALREADY_EXISTS."""
    return ErrorCode(code).name.upper()


# Errors of a coordinator that is moving or loading (or, on a new Kafka cluster, of
# __consumer_offsets being created): Kafka's Admin client retries them, so do we.
RETRIABLE = frozenset({ErrorCode.coordinator_load_in_progress,
                       ErrorCode.coordinator_not_available, ErrorCode.not_coordinator})
T = TypeVar("T")


def retrying(settings: Settings, attempt: Callable[[], T]) -> T:
    """attempt() again after a retriable error, with a growing pause, until request.timeout.ms."""
    deadline = time.monotonic() + settings.timeout
    pause = 0.05
    while True:
        try:
            return attempt()
        except KafkaRequestError as e:
            if e.code not in RETRIABLE or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 1.0)


def check(code: int, message: str | None = None) -> None:
    if code != ErrorCode.none:
        raise KafkaRequestError(code, message)


# ---- settings ------------------------------------------------------------------------------


def load_properties(path: str) -> dict[str, str]:
    """A Java-style properties file (`key=value` or `key: value`, `#` / `!` comments)."""
    out: dict[str, str] = {}
    with open(path, encoding="utf-8") as f:
        for raw in f:
            line = raw.strip()
            if not line or line[0] in "#!":
                continue
            match = re.match(r"([^=:\s]+)\s*[=:]\s*(.*)", line)
            if match is None:
                raise AdminError("INVALID_CONFIG", f"{path}: no '=' in {line!r}")
            out[match[1]] = match[2]
    return out


def jaas_credentials(jaas: str) -> tuple[str | None, str | None]:
    """username and password of a `sasl.jaas.config` value (PLAIN and SCRAM login modules)."""
    found = dict(re.findall(r'(username|password)\s*=\s*"([^"]*)"', jaas))
    return found.get("username"), found.get("password")


class Settings:
    """The client properties of one command: bootstrap servers and security."""

    def __init__(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)
        servers = self.props.get("bootstrap.servers", "")
        self.bootstrap = [s.strip() for s in servers.split(",") if s.strip()]
        if not self.bootstrap:
            raise AdminError("INVALID_CONFIG", "no bootstrap server: give -b HOST:PORT")
        self.protocol = self.props.get("security.protocol", "PLAINTEXT").upper()
        if self.protocol not in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"):
            raise AdminError("INVALID_CONFIG", f"unknown security.protocol {self.protocol}")
        self.mechanism = self.props.get("sasl.mechanism", "GSSAPI" if self.sasl else "").upper()
        user, password = jaas_credentials(self.props.get("sasl.jaas.config", ""))
        self.username = self.props.get("sasl.username", user)
        self.password = self.props.get("sasl.password", password)
        self.timeout = int(self.props.get("request.timeout.ms", "30000")) / 1000

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    def ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=self.props.get("ssl.ca.location"))
        if self.props.get("ssl.endpoint.identification.algorithm", "https") == "":
            ctx.check_hostname = False
        if self.props.get("enable.ssl.certificate.verification", "true") == "false":
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        cert = self.props.get("ssl.certificate.location")
        if cert:
            ctx.load_cert_chain(cert, self.props.get("ssl.key.location"),
                                self.props.get("ssl.key.password"))
        return ctx


def split_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise AdminError("INVALID_CONFIG", f"bad broker address {address!r}: want HOST:PORT")
    return host.strip("[]"), int(port)


# ---- one connection ------------------------------------------------------------------------


class Connection:
    """One broker: TLS and SASL as the settings say, then requests one at a time."""

    def __init__(self, address: str, settings: Settings) -> None:
        self.address = address
        host, port = split_address(address)
        try:
            sock = socket.create_connection((host, port), timeout=settings.timeout)
            if settings.tls:
                sock = settings.ssl_context().wrap_socket(sock, server_hostname=host)
        except (OSError, ssl.SSLError) as e:
            raise AdminError("NETWORK_EXCEPTION", f"cannot connect to {address}: {e}") from e
        self.sock = sock
        self._correlation = 0
        self.versions: dict[int, tuple[int, int]] = {}
        try:
            self.versions = self._api_versions()
            if settings.sasl:
                self._authenticate(settings)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        self.sock.close()

    @property
    def closed(self) -> bool:
        return self.sock.fileno() < 0

    def supports(self, api_key: int) -> bool:
        return api_key in self.versions

    def version(self, api_key: int) -> int:
        """The newest version both the broker and our codecs speak."""
        if api_key not in self.versions:
            raise AdminError("UNSUPPORTED_VERSION", f"the broker at {self.address} does not "
                             f"serve API key {api_key}")
        low, high = self.versions[api_key]
        for v in range(min(high, VERSION_CAPS.get(api_key, high)), low - 1, -1):
            try:
                request_type(api_key, v)
                return v
            except UnknownVersion:
                continue
        raise AdminError("UNSUPPORTED_VERSION", f"no common version of API key {api_key} with "
                         f"{self.address} (it serves v{low}-{high})")

    def call(self, api_key: int, body: Mapping[str, Any], version: int | None = None,
             answered: bool = True) -> Any:
        """Send a request and read its response (None when not `answered`: a Produce with
        acks=0 gets none)."""
        v = self.version(api_key) if version is None else version
        self._correlation += 1
        req = request_type(api_key, v)
        header = struct.pack(">hhih", api_key, v, self._correlation, len(CLIENT_ID)) + CLIENT_ID
        if req.__flexible__:
            header += b"\x00"
        payload = header + encode(build(req, body))
        try:
            self.sock.sendall(struct.pack(">i", len(payload)) + payload)
            if not answered:
                return None
            frame = self._read(struct.unpack(">i", self._read(4))[0])
        except (OSError, ssl.SSLError) as e:
            self.close()
            raise AdminError("NETWORK_EXCEPTION", f"{self.address}: {e}") from e
        except BaseException:
            # An interrupt (Ctrl-C) between the request and the whole response: what is left
            # of it on the socket would be read as the answer to the next request
            self.close()
            raise
        (correlation,) = struct.unpack_from(">i", frame, 0)
        if correlation != self._correlation:
            raise AdminError("CORRUPT_MESSAGE", f"{self.address} answered correlation id "
                             f"{correlation}, not {self._correlation}")
        resp = response_type(api_key, v)
        offset = 5 if resp.__flexible__ and api_key != API_VERSIONS else 4
        value, _ = reader(resp)(frame, offset)
        return value

    def _read(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self.sock.recv(n)
            if not chunk:
                raise OSError(f"connection closed by {self.address}")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def _api_versions(self) -> dict[int, tuple[int, int]]:
        # v2: not flexible, so every broker since Kafka 2.0 answers it as asked.
        resp = self.call(API_VERSIONS, {}, version=2)
        check(resp.error_code)
        return {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in resp.api_keys}

    def _authenticate(self, settings: Settings) -> None:
        mechanism = settings.mechanism
        if mechanism != "PLAIN" and mechanism not in SCRAM_HASHES:
            raise AdminError("UNSUPPORTED_SASL_MECHANISM", f"sasl.mechanism {mechanism}: "
                             "the admin commands speak PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512")
        if settings.username is None or settings.password is None:
            raise AdminError("INVALID_CONFIG", "SASL needs sasl.username and sasl.password")
        resp = self.call(SASL_HANDSHAKE, {"mechanism": mechanism}, version=1)
        check(resp.error_code, f"the broker enables {', '.join(resp.mechanisms)}")
        if mechanism == "PLAIN":
            self._sasl_step(f"\0{settings.username}\0{settings.password}".encode())
        else:
            Scram(mechanism, settings.username, settings.password).run(self._sasl_step)

    def _sasl_step(self, data: bytes) -> bytes:
        resp = self.call(SASL_AUTHENTICATE, {"auth_bytes": data})
        check(resp.error_code, resp.error_message)
        return bytes(resp.auth_bytes)


# ---- SCRAM (RFC 5802), the client's side -----------------------------------------------------

SCRAM_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


class Scram:
    def __init__(self, mechanism: str, username: str, password: str) -> None:
        self.hash = SCRAM_HASHES[mechanism]
        self.username = username.replace("=", "=3D").replace(",", "=2C")
        self.password = password.encode()
        self.nonce = secrets.token_urlsafe(24)

    def _hmac(self, key: bytes, msg: bytes) -> bytes:
        return hmac.new(key, msg, self.hash).digest()

    def run(self, step: Any) -> None:
        first_bare = f"n={self.username},r={self.nonce}"
        server_first = step(f"n,,{first_bare}".encode()).decode()
        fields = dict(item.split("=", 1) for item in server_first.split(","))
        if not fields.get("r", "").startswith(self.nonce):
            raise AdminError("SASL_AUTHENTICATION_FAILED", "the server's nonce does not "
                             "extend ours")
        salted = hashlib.pbkdf2_hmac(self.hash, self.password, base64.b64decode(fields["s"]),
                                     int(fields["i"]))
        final_bare = f"c=biws,r={fields['r']}"
        auth = f"{first_bare},{server_first},{final_bare}".encode()
        client_key = self._hmac(salted, b"Client Key")
        signature = self._hmac(hashlib.new(self.hash, client_key).digest(), auth)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_final = step(f"{final_bare},p={base64.b64encode(proof).decode()}".encode())
        expected = self._hmac(self._hmac(salted, b"Server Key"), auth)
        if server_final.decode() != f"v={base64.b64encode(expected).decode()}":
            raise AdminError("SASL_AUTHENTICATION_FAILED", "the server's signature is wrong")


# ---- the cluster ---------------------------------------------------------------------------


class Admin:
    """Connections to the brokers of one cluster, opened as requests need them."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._by_address: dict[str, Connection] = {}
        self._brokers: dict[int, str] | None = None

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for conn in self._by_address.values():
            conn.close()
        self._by_address.clear()

    def connect(self, address: str) -> Connection:
        known = self._by_address.get(address)
        if known is None or known.closed:  # closed by a failed or interrupted request
            self._by_address[address] = Connection(address, self.settings)
        return self._by_address[address]

    def any(self) -> Connection:
        """A bootstrap broker (the first that answers)."""
        if self._by_address:
            return self.connect(next(iter(self._by_address)))
        last: AdminError | None = None
        for address in self.settings.bootstrap:
            try:
                return self.connect(address)
            except AdminError as e:
                if e.name != "NETWORK_EXCEPTION":
                    raise
                last = e
        assert last is not None
        raise last

    def metadata(self, topics: list[str] | None = None) -> Any:
        """A Metadata response: every topic, or those named."""
        body = {"topics": None if topics is None else [{"name": t} for t in topics],
                "allow_auto_topic_creation": False}
        resp = self.any().call(3, body)
        self._brokers = {int(b.node_id): f"{b.host}:{b.port}" for b in resp.brokers}
        return resp

    def brokers(self) -> dict[int, str]:
        if self._brokers is None:
            self.metadata([])
        assert self._brokers is not None
        return self._brokers

    def node(self, node_id: int) -> Connection:
        address = self.brokers().get(node_id)
        if address is None:
            raise AdminError("BROKER_NOT_AVAILABLE", f"broker {node_id} is not in the metadata")
        return self.connect(address)

    def controller(self) -> Connection:
        """The broker Metadata names controller (where Kafka's Admin client sends partition
        reassignments and leader elections)."""
        controller = int(self.metadata([]).controller_id)
        if controller < 0:
            raise AdminError("NOT_CONTROLLER", "the cluster has no controller at the moment")
        return self.node(controller)

    def coordinator(self, key: str, key_type: int = GROUP_KEY) -> Connection:
        """The coordinator of group `key` (or of a transactional id with TXN_KEY), as
        FindCoordinator names it."""
        conn = self.any()
        v = conn.version(10)
        body = {"key_type": key_type, "key": key, "coordinator_keys": [key]}
        resp = conn.call(10, body, v)
        found = resp.coordinators[0] if v >= 4 else resp
        check(found.error_code, found.error_message)
        return self.connect(f"{found.host}:{found.port}")
