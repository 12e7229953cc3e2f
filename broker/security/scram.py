"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka does them: credentials
(salt, StoredKey, ServerKey, iterations) and the server side of the exchange.

A credential is kept as Kafka keeps it in ZooKeeper's /config/users/<user>:
`salt=<base64>,stored_key=<base64>,server_key=<base64>,iterations=<n>`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
from collections.abc import Callable
from dataclasses import dataclass

from samsa.protocol.errors import ErrorCode, KafkaError

MECHANISMS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
# DescribeUserScramCredentials' mechanism ids (Kafka's ScramMechanism.type()).
MECHANISM_TYPES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384


# (user, mechanism) -> the user's credential for it, or None.
CredentialLookup = Callable[[str, str], "ScramCredential | None"]
# (token id, mechanism) -> a delegation token's (credential, owner's name, expiry in ms since
# the epoch), or None when there is no such live token (broker/security/tokens.py).
TokenLookup = Callable[[str, str], "tuple[ScramCredential, str, int] | None"]


class ScramError(KafkaError, code=ErrorCode.sasl_authentication_failed):
    """The exchange failed; Kafka answers with its generic message, not this one."""


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_config(self) -> str:
        b64 = base64.b64encode
        return (f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
                f"server_key={b64(self.server_key).decode()},iterations={self.iterations}")

    @classmethod
    def from_config(cls, text: str) -> ScramCredential:
        fields = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
        return cls(base64.b64decode(fields["salt"]), base64.b64decode(fields["stored_key"]),
                   base64.b64decode(fields["server_key"]), int(fields["iterations"]))


def credential_from_salted(mechanism: str, salted: bytes, salt: bytes,
                           iterations: int) -> ScramCredential:
    """From the salted password (what AlterUserScramCredentials carries)."""
    algo = MECHANISMS[mechanism]
    client_key = hmac.digest(salted, b"Client Key", algo)
    stored_key = hashlib.new(algo, client_key).digest()
    server_key = hmac.digest(salted, b"Server Key", algo)
    return ScramCredential(salt, stored_key, server_key, iterations)


def _attributes(message: str) -> dict[str, str]:
    out = {}
    for part in message.split(","):
        if len(part) < 2 or part[1] != "=":
            raise ScramError(f"invalid SCRAM attribute {part!r}")
        out[part[0]] = part[2:]
    return out


def _first_attributes(bare: str) -> tuple[dict[str, str], dict[str, str]]:
    """client-first-message-bare: its n= and r= attributes, then Kafka's SCRAM extensions
    (`,key=value` after the nonce, ScramMessages.ClientFirstMessage)."""
    parts = bare.split(",")
    attrs = _attributes(",".join(parts[:2]))
    extensions: dict[str, str] = {}
    for part in parts[2:]:
        key, sep, value = part.partition("=")
        if not sep or not key.isalpha():
            raise ScramError(f"invalid SCRAM extension {part!r}")
        extensions[key] = value
    return attrs, extensions


def _username(text: str) -> str:
    # RFC 5802 saslname: "=2C" is ",", "=3D" is "="; any other "=" is invalid.
    if re.search(r"=(?!2C|3D)", text):
        raise ScramError("invalid username encoding")
    return text.replace("=2C", ",").replace("=3D", "=")


class ScramServer:
    """One exchange: client-first -> server-first, client-final -> server-final."""

    def __init__(self, mechanism: str, lookup: CredentialLookup,
                 tokens: TokenLookup | None = None) -> None:
        self.mechanism = mechanism
        self._algo = MECHANISMS[mechanism]
        self._lookup = lookup
        self._tokens = tokens
        self._state = "first"
        self.username: str | None = None  # the principal's name: a token's owner's
        self.complete = False
        # A `tokenauth=true` login (Kafka's ScramExtensions.tokenAuthenticated): the session
        # ends when the token expires (KIP-368's credential lifetime, ms since the epoch).
        self.token_authenticated = False
        self.lifetime_ms: int | None = None

    def evaluate(self, token: bytes) -> bytes:
        try:
            message = token.decode()
        except UnicodeDecodeError:
            raise ScramError("SCRAM message is not UTF-8") from None
        if self._state == "first":
            return self._first(message)
        if self._state == "final":
            return self._final(message)
        raise ScramError("unexpected SCRAM message")

    def _first(self, message: str) -> bytes:
        m = re.fullmatch(r"([ny]|p=[^,]*),(a=[^,]*)?,(.*)", message)
        if m is None or m.group(1).startswith("p="):
            raise ScramError("invalid client-first message")
        self._gs2 = f"{m.group(1)},{m.group(2) or ''},"
        self._client_first_bare = m.group(3)
        attrs, extensions = _first_attributes(self._client_first_bare)
        if "n" not in attrs or "r" not in attrs:
            raise ScramError("client-first message without user or nonce")
        self.username = _username(attrs["n"])
        authzid = m.group(2)
        if authzid and _username(authzid[2:]) != self.username:
            raise ScramError("authorization id differs from the user name")
        credential: ScramCredential | None
        if extensions.get("tokenauth", "false").lower() == "true":
            credential = self._token_credential(self.username)
        else:
            credential = self._lookup(self.username, self.mechanism)
        if credential is None:
            raise ScramError(f"no {self.mechanism} credential for user {self.username}")
        self._credential = credential
        self._nonce = attrs["r"] + base64.b64encode(os.urandom(18)).decode()
        self._server_first = (f"r={self._nonce},s={base64.b64encode(credential.salt).decode()},"
                              f"i={credential.iterations}")
        self._state = "final"
        return self._server_first.encode()

    def _token_credential(self, token_id: str) -> ScramCredential:
        """A delegation token's credential; the principal becomes its owner."""
        found = self._tokens(token_id, self.mechanism) if self._tokens is not None else None
        if found is None:
            raise ScramError(f"Token Authentication failed: Invalid tokenId : {token_id}")
        credential, owner, expiry_ms = found
        self.username, self.token_authenticated, self.lifetime_ms = owner, True, expiry_ms
        return credential

    def _final(self, message: str) -> bytes:
        self._state = "done"
        without_proof, sep, proof_part = message.rpartition(",p=")
        if not sep:
            raise ScramError("client-final message without proof")
        attrs = _attributes(without_proof)
        if attrs.get("r") != self._nonce:
            raise ScramError("nonce mismatch")
        if base64.b64decode(attrs.get("c", "")) != self._gs2.encode():
            raise ScramError("channel binding mismatch")
        try:
            proof = base64.b64decode(proof_part, validate=True)
        except ValueError:
            raise ScramError("invalid proof encoding") from None
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        cred = self._credential
        signature = hmac.digest(cred.stored_key, auth_message, self._algo)
        if len(proof) != len(signature):
            raise ScramError("invalid proof")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self._algo, client_key).digest(),
                                   cred.stored_key):
            raise ScramError("invalid client credentials")
        server_signature = hmac.digest(cred.server_key, auth_message, self._algo)
        self.complete = True
        return b"v=" + base64.b64encode(server_signature)


class ScramClient:
    """The client side (a broker logging in to another): client-first, then client-final from
    the server-first, then the server-final's signature checked."""

    def __init__(self, mechanism: str, username: str, password: str) -> None:
        self._algo = MECHANISMS[mechanism]
        self._username = username.replace("=", "=3D").replace(",", "=2C")
        self._password = password
        self._nonce = base64.b64encode(os.urandom(18)).decode()
        self._client_first_bare = f"n={self._username},r={self._nonce}"
        self._server_signature = b""

    def first(self) -> bytes:
        return f"n,,{self._client_first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        text = server_first.decode()
        attrs = _attributes(text)
        nonce = attrs.get("r", "")
        if not nonce.startswith(self._nonce) or "s" not in attrs or "i" not in attrs:
            raise ScramError("invalid server-first message")
        salt, iterations = base64.b64decode(attrs["s"]), int(attrs["i"])
        salted = hashlib.pbkdf2_hmac(self._algo, self._password.encode(), salt, iterations)
        client_key = hmac.digest(salted, b"Client Key", self._algo)
        stored_key = hashlib.new(self._algo, client_key).digest()
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._client_first_bare},{text},{without_proof}".encode()
        signature = hmac.digest(stored_key, auth_message, self._algo)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = hmac.digest(salted, b"Server Key", self._algo)
        self._server_signature = hmac.digest(server_key, auth_message, self._algo)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        attrs = _attributes(server_final.decode())
        if "e" in attrs:
            raise ScramError(f"the server refused: {attrs['e']}")
        if not hmac.compare_digest(base64.b64decode(attrs.get("v", "")),
                                   self._server_signature):
            raise ScramError("invalid server signature")
