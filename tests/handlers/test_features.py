"""Finalized features (KIP-584): UpdateFeatures (57) as Kafka's controller checks it
(FeatureControlManager), and what ApiVersions (18) says of them. A refused request changes
nothing; a feature finalized at level 0 is removed, and the APIs it gates are neither
advertised nor served."""

from __future__ import annotations

from typing import Any

from samsa.protocol.errors import ErrorCode

from .harness import Handlers

UPGRADE, SAFE_DOWNGRADE = 1, 2


async def _update(h: Handlers, feature: str, level: int, upgrade_type: int = UPGRADE, *,
                  validate_only: bool = False) -> Any:
    return await h.call("UpdateFeatures", 1, {"timeout": 5000, "feature_updates": [
        {"feature": feature, "max_version_level": level, "upgrade_type": upgrade_type}],
        "validate_only": validate_only})


def _levels(h: Handlers) -> dict[str, int]:
    return dict(h.broker.store.finalized_features().levels)


async def _api_versions(h: Handlers) -> Any:
    return await h.call("ApiVersions", 3, {"client_software_name": "t",
                                           "client_software_version": "1"})


async def test_a_lower_level_needs_a_downgrade_type(handlers):
    before = _levels(handlers)
    r = await _update(handlers, "transaction.version", 1, UPGRADE)
    assert r.error_code == ErrorCode.invalid_update_version
    assert r.results == ()  # v1: no per-feature results when the request fails
    assert _levels(handlers) == before


async def test_a_downgrade_cannot_raise_the_level(handlers):
    await _update(handlers, "transaction.version", 1, SAFE_DOWNGRADE)
    r = await _update(handlers, "transaction.version", 2, SAFE_DOWNGRADE)
    assert r.error_code == ErrorCode.invalid_update_version
    assert _levels(handlers)["transaction.version"] == 1


async def test_an_unknown_feature_is_refused(handlers):
    r = await _update(handlers, "no.such.version", 1)
    assert r.error_code == ErrorCode.invalid_update_version
    assert "no.such.version" not in _levels(handlers)


async def test_validate_only_changes_nothing(handlers):
    before = _levels(handlers)
    r = await _update(handlers, "transaction.version", 1, SAFE_DOWNGRADE, validate_only=True)
    assert r.error_code == ErrorCode.none
    assert _levels(handlers) == before


async def test_v1_answers_each_feature_and_v2_none(handlers):
    v1 = await _update(handlers, "transaction.version", 1, SAFE_DOWNGRADE)
    v2 = await handlers.call("UpdateFeatures", 2, {"timeout": 5000, "feature_updates": [
        {"feature": "transaction.version", "max_version_level": 2, "upgrade_type": UPGRADE}],
        "validate_only": False})
    assert [(f.feature, f.error_code) for f in v1.results] == [
        ("transaction.version", ErrorCode.none)]
    assert v2.error_code == ErrorCode.none and not hasattr(v2, "results")


async def test_v0_downgrades_only_with_allow_downgrade(handlers):
    def update(allow: bool) -> dict[str, Any]:
        return {"timeout": 5000, "feature_updates": [
            {"feature": "transaction.version", "max_version_level": 1,
             "allow_downgrade": allow}]}
    refused = await handlers.call("UpdateFeatures", 0, update(False))
    allowed = await handlers.call("UpdateFeatures", 0, update(True))
    assert refused.error_code == ErrorCode.invalid_update_version
    assert allowed.error_code == ErrorCode.none
    assert _levels(handlers)["transaction.version"] == 1


async def test_api_versions_shows_the_new_level_and_a_newer_epoch(handlers):
    before = await _api_versions(handlers)
    await _update(handlers, "transaction.version", 1, SAFE_DOWNGRADE)
    after = await _api_versions(handlers)
    finalized = {f.name: f.max_version_level for f in after.finalized_features}
    assert finalized["transaction.version"] == 1
    assert after.finalized_features_epoch > before.finalized_features_epoch


async def test_level_zero_removes_the_feature_and_the_apis_it_gates(handlers):
    r = await _update(handlers, "share.version", 0, SAFE_DOWNGRADE)
    after = await _api_versions(handlers)
    assert r.error_code == ErrorCode.none
    assert "share.version" not in {f.name for f in after.finalized_features}
    assert not {76, 77, 78, 79} & {k.api_key for k in after.api_keys}
    beat = await handlers.call("ShareGroupHeartbeat", 1, {
        "group_id": "sg", "member_id": "m1", "member_epoch": 0, "rack_id": None,
        "subscribed_topic_names": ["t"]})
    assert beat.error_code == ErrorCode.unsupported_version
