"""UpdateFeatures (57): change the cluster's finalized feature levels (`kafka-features upgrade |
downgrade | disable`); ApiVersions reports them (broker/cluster/features.py).

As Kafka 4.x answers it (FeatureControlManager, UpdateFeaturesResponse.createWithErrors): the
updates are checked together and applied all at once or not at all; the first bad one is the
top-level error (INVALID_UPDATE_VERSION with Kafka's message) and no per-feature results, else
NONE for each feature (v2 carries no per-feature results at all).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from samsa.protocol.errors import ErrorCode, KafkaError

from ..cluster.features import UpgradeType, apply_updates, supported
from ..context import RequestContext
from ..security.authorizer import AclOperation, ResourceType
from .declare import api

if TYPE_CHECKING:
    from .requests import UpdateFeaturesRequest

log = logging.getLogger(__name__)


@api(57, "UpdateFeatures", (0, 2))
async def handle_update_features(
    ctx: RequestContext, request: UpdateFeaturesRequest
) -> dict[str, Any]:
    updates: list[tuple[str, int, int]] = []
    for u in request.feature_updates:
        if hasattr(u, "upgrade_type"):
            upgrade_type = int(u.upgrade_type)
        else:  # v0: AllowDowngrade
            upgrade_type = (UpgradeType.SAFE_DOWNGRADE if getattr(u, "allow_downgrade", False)
                            else UpgradeType.UPGRADE)
        updates.append((u.feature, int(u.max_version_level), upgrade_type))
    names = list(dict.fromkeys(name for name, _, _ in updates))
    response: dict[str, Any] = {"throttle_time": 0, "error_code": ErrorCode.none,
                                "error_message": None}
    if not ctx.authorize(AclOperation.ALTER, ResourceType.CLUSTER):
        response["error_code"] = ErrorCode.cluster_authorization_failed
        response["error_message"] = "The client is not authorized to alter the cluster's features"
    elif len(names) != len(updates):
        response["error_code"] = ErrorCode.invalid_request
        response["error_message"] = "The request contains multiple updates for the same feature."
    else:
        supported_levels = supported(ctx.config["unstable.feature.versions.enable"])
        try:
            if ctx.version >= 1 and getattr(request, "validate_only", False):
                apply_updates(ctx.broker_id, ctx.store.finalized_features().levels, updates,
                              supported_levels)
            else:
                def apply(levels: dict[str, int]) -> dict[str, int]:
                    return apply_updates(ctx.broker_id, levels, updates, supported_levels)

                features = await ctx.store.update_features(apply)
                log.info("finalized features updated by %s: %s (epoch %d)", ctx.peer,
                         features.levels, features.epoch)
        except KafkaError as e:
            log.info("UpdateFeatures from %s refused: %s", ctx.peer, e)
            response["error_code"] = e.error_code
            response["error_message"] = str(e)
    if ctx.version < 2:
        response["results"] = [
            {"feature": name, "error_code": ErrorCode.none, "error_message": None}
            for name in names
        ] if response["error_code"] == ErrorCode.none else []
    return response
