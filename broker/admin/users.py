"""`samsa user list|describe|set-scram|delete-scram`: SCRAM credentials of users, by
DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554).

The password never leaves the client: as Kafka's Admin client (and so kafka-configs.sh) does,
the command draws a random salt and sends only the salted password, Hi(password, salt,
iterations) of RFC 5802 (PBKDF2 with the mechanism's HMAC)."""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

from samsa.protocol.errors import ErrorCode

from .client import SCRAM_HASHES, Admin, AdminError, check

DESCRIBE_USER_SCRAM, ALTER_USER_SCRAM = 50, 51
MECHANISMS = ("UNKNOWN", "SCRAM-SHA-256", "SCRAM-SHA-512")  # by wire code
DEFAULT_ITERATIONS = 4096  # kafka-configs.sh's default, and the least Kafka accepts


def mechanism_code(name: str) -> int:
    key = name.upper().replace("_", "-")
    if key not in MECHANISMS[1:]:
        raise AdminError("UNSUPPORTED_SASL_MECHANISM", f"unknown SCRAM mechanism {name!r}: "
                         f"{' or '.join(MECHANISMS[1:])}")
    return MECHANISMS.index(key)


def describe(admin: Admin, users: list[str] | None) -> list[dict[str, Any]]:
    """Each user's SCRAM mechanisms and iterations (every user with credentials when None)."""
    body = {"users": None if users is None else [{"name": u} for u in users]}
    resp = admin.any().call(DESCRIBE_USER_SCRAM, body)
    check(resp.error_code, resp.error_message)
    out = []
    for r in resp.results:
        check(r.error_code, r.error_message or (
            f"User {r.user} has no SCRAM credentials." if
            r.error_code == ErrorCode.resource_not_found else None))
        out.append({"user": r.user, "credentials": [
            {"mechanism": MECHANISMS[c.mechanism], "iterations": int(c.iterations)}
            for c in sorted(r.credential_infos, key=lambda c: c.mechanism)]})
    return sorted(out, key=lambda u: u["user"])


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i) of RFC 5802 (SaltedPassword)."""
    return hashlib.pbkdf2_hmac(SCRAM_HASHES[mechanism], password.encode(), salt, iterations)


def _salt() -> bytes:
    # As Kafka's ScramFormatter: 130 random bits written in base 36.
    n, digits = secrets.randbits(130), "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while n:
        n, d = divmod(n, 36)
        out = digits[d] + out
    return (out or "0").encode()


def _alter(admin: Admin, body: dict[str, Any]) -> None:
    for r in admin.any().call(ALTER_USER_SCRAM, body).results:
        check(r.error_code, r.error_message)


def set_scram(admin: Admin, user: str, mechanisms: list[str], password: str,
              iterations: int = DEFAULT_ITERATIONS) -> dict[str, Any]:
    codes = [mechanism_code(m) for m in mechanisms]
    upsertions = []
    for code in codes:
        salt = _salt()
        upsertions.append({"name": user, "mechanism": code, "iterations": iterations,
                           "salt": salt, "salted_password": salted_password(
                               MECHANISMS[code], password, salt, iterations)})
    _alter(admin, {"deletions": [], "upsertions": upsertions})
    return {"user": user, "set": [MECHANISMS[c] for c in codes], "iterations": iterations}


def delete_scram(admin: Admin, user: str, mechanisms: list[str]) -> dict[str, Any]:
    codes = [mechanism_code(m) for m in mechanisms]
    _alter(admin, {"deletions": [{"name": user, "mechanism": c} for c in codes],
                   "upsertions": []})
    return {"user": user, "deleted": [MECHANISMS[c] for c in codes]}
