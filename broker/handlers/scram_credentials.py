"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51): SCRAM users, stored
as Kafka stores them (ZooKeeper's /config/users/<user>; the single-broker metadata file).

Checks and messages follow Kafka's ZkAdminManager: unknown mechanism, empty user, iterations
outside [4096, 16384], a user/mechanism altered twice, deleting what does not exist.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import TYPE_CHECKING, Any

from samsa.protocol.errors import ErrorCode

from ..context import RequestContext
from ..security.authorizer import AclOperation, ResourceType
from ..security.scram import (
    MAX_ITERATIONS,
    MECHANISM_TYPES,
    MIN_ITERATIONS,
    ScramCredential,
    credential_from_salted,
)
from .common import refused_on_cluster
from .declare import api

if TYPE_CHECKING:
    from .requests import AlterUserScramCredentialsRequest, DescribeUserScramCredentialsRequest

log = logging.getLogger(__name__)

_BY_TYPE = {t: name for name, t in MECHANISM_TYPES.items()}


@api(50, "DescribeUserScramCredentials", (0, 0))
async def handle_describe_user_scram_credentials(
    ctx: RequestContext, request: DescribeUserScramCredentialsRequest
) -> dict[str, Any]:
    if refused := refused_on_cluster(ctx, AclOperation.DESCRIBE, error_message=None, results=[]):
        return refused
    users = ctx.store.scram_users()
    wanted = [u.name for u in request.users] if request.users else None
    results: list[dict[str, Any]] = []
    if wanted is None:
        names = sorted(users)
    else:
        counts = Counter(wanted)
        names = list(dict.fromkeys(wanted))
    for name in names:
        if wanted is not None and counts[name] > 1:
            results.append(_describe_error(
                name, ErrorCode.duplicate_resource,
                "Cannot describe SCRAM credentials for the same user twice in a single request"))
            continue
        infos = []
        for mechanism, text in sorted(users.get(name, {}).items()):
            try:
                iterations = ScramCredential.from_config(text).iterations
            except (ValueError, KeyError):
                continue
            infos.append({"mechanism": MECHANISM_TYPES[mechanism], "iterations": iterations})
        if not infos:
            results.append(_describe_error(
                name, ErrorCode.resource_not_found,
                "Attempt to describe a user credential that does not exist"))
            continue
        results.append({"user": name, "error_code": ErrorCode.none, "error_message": None,
                        "credential_infos": infos})
    return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None,
            "results": results}


def _describe_error(user: str, code: ErrorCode, message: str) -> dict[str, Any]:
    return {"user": user, "error_code": code, "error_message": message, "credential_infos": []}


def _mechanism(user: str, mechanism_type: int, times: int) -> str | tuple[ErrorCode, str]:
    """The mechanism a deletion or an upsertion names, or why it is refused (Kafka's checks
    common to both; `times` is how often the request names this user and mechanism)."""
    mechanism = _BY_TYPE.get(mechanism_type)
    if not user:
        return ErrorCode.unacceptable_credential, "Username must not be empty"
    if mechanism is None:
        return ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
    if times > 1:
        return (ErrorCode.duplicate_resource,
                "A user credential cannot be altered twice in the same request")
    return mechanism


@api(51, "AlterUserScramCredentials", (0, 0))
async def handle_alter_user_scram_credentials(
    ctx: RequestContext, request: AlterUserScramCredentialsRequest
) -> dict[str, Any]:
    order = list(dict.fromkeys([d.name for d in request.deletions]
                               + [u.name for u in request.upsertions]))
    if not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER):  # each user's entry says so
        return {"throttle_time": 0, "results": [
            {"user": u, "error_code": ErrorCode.cluster_authorization_failed,
             "error_message": None} for u in order]}
    existing = ctx.store.scram_users()
    errors: dict[str, tuple[ErrorCode, str]] = {}
    pairs = Counter([(d.name, d.mechanism) for d in request.deletions]
                    + [(u.name, u.mechanism) for u in request.upsertions])

    def fail(user: str, code: ErrorCode, message: str) -> None:
        errors.setdefault(user, (code, message))

    changes: list[tuple[str, str, ScramCredential | None]] = []
    for d in request.deletions:
        mechanism = _mechanism(d.name, d.mechanism, pairs[(d.name, d.mechanism)])
        if isinstance(mechanism, tuple):
            fail(d.name, *mechanism)
        elif mechanism not in existing.get(d.name, {}):
            fail(d.name, ErrorCode.resource_not_found,
                 "Attempt to delete a user credential that does not exist")
        else:
            changes.append((d.name, mechanism, None))
    for u in request.upsertions:
        mechanism = _mechanism(u.name, u.mechanism, pairs[(u.name, u.mechanism)])
        if isinstance(mechanism, tuple):
            fail(u.name, *mechanism)
        elif u.iterations < MIN_ITERATIONS:
            fail(u.name, ErrorCode.unacceptable_credential, "Too few iterations")
        elif u.iterations > MAX_ITERATIONS:
            fail(u.name, ErrorCode.unacceptable_credential, "Too many iterations")
        elif not u.salt or not u.salted_password:
            fail(u.name, ErrorCode.unacceptable_credential, "Salt and salted password must "
                 "not be empty")
        else:
            changes.append((u.name, mechanism, credential_from_salted(
                mechanism, u.salted_password, u.salt, u.iterations)))
    # A user with any failed alteration gets none of them (Kafka's per-user result).
    changes = [c for c in changes if c[0] not in errors]
    if changes:
        await ctx.store.alter_scram_credentials(changes)
        log.info("SCRAM credentials altered for %s", ", ".join(dict.fromkeys(
            c[0] for c in changes)))
    return {"throttle_time": 0, "results": [
        {"user": user, "error_code": errors.get(user, (ErrorCode.none, None))[0],
         "error_message": errors.get(user, (ErrorCode.none, None))[1]}
        for user in order
    ]}
