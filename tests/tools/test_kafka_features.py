"""kafka-features (org.apache.kafka.tools.FeatureCommand, Kafka 4.x) against Samsa: describe
reads ApiVersions' feature levels, upgrade/downgrade send UpdateFeatures (share.version among
them: 0 turns share groups off)."""

from __future__ import annotations

import uuid

from tests.groups.test_share_groups_wire import _hb
from tests.protocol.wire import WireClient
from tests.support.java import JavaResult, run_java_tool

FEATURE_COMMAND = "org.apache.kafka.tools.FeatureCommand"


def _features(bootstrap: str, *args: str) -> JavaResult:
    return run_java_tool(FEATURE_COMMAND, ["--bootstrap-server", bootstrap, *args])


def _described(res: JavaResult) -> list[str]:
    return [" ".join(line.split()) for line in res.stdout.splitlines() if line.strip()]


def test_kafka_features_describe_upgrade_downgrade(broker):
    bootstrap = broker.bootstrap
    res = _features(bootstrap, "describe").check()
    # a new cluster finalizes transactions v2, group.version 1, share.version 1 and
    # streams.version 1 (Kafka 4.4)
    assert _described(res) == [
        "Feature: group.version SupportedMinVersion: 0 SupportedMaxVersion: 1 "
        "FinalizedVersionLevel: 1 Epoch: 0",
        "Feature: share.version SupportedMinVersion: 0 SupportedMaxVersion: 1 "
        "FinalizedVersionLevel: 1 Epoch: 0",
        "Feature: streams.version SupportedMinVersion: 0 SupportedMaxVersion: 1 "
        "FinalizedVersionLevel: 1 Epoch: 0",
        "Feature: transaction.version SupportedMinVersion: 0 SupportedMaxVersion: 2 "
        "FinalizedVersionLevel: 2 Epoch: 0"], res.describe()

    res = _features(bootstrap, "downgrade", "--feature", "transaction.version=1").check()
    assert "transaction.version was downgraded to 1." in res.stdout, res.describe()
    res = _features(bootstrap, "describe").check()
    assert _described(res) == [
        "Feature: group.version SupportedMinVersion: 0 SupportedMaxVersion: 1 "
        "FinalizedVersionLevel: 1 Epoch: 1",
        "Feature: share.version SupportedMinVersion: 0 SupportedMaxVersion: 1 "
        "FinalizedVersionLevel: 1 Epoch: 1",
        "Feature: streams.version SupportedMinVersion: 0 SupportedMaxVersion: 1 "
        "FinalizedVersionLevel: 1 Epoch: 1",
        "Feature: transaction.version SupportedMinVersion: 0 SupportedMaxVersion: 2 "
        "FinalizedVersionLevel: 1 Epoch: 1"], res.describe()

    # Beyond what the broker supports: Kafka's INVALID_UPDATE_VERSION with its reason.
    res = _features(bootstrap, "upgrade", "--feature", "transaction.version=3")
    assert res.returncode != 0, res.describe()
    assert ("Could not upgrade transaction.version to 3. Invalid update version 3 for feature "
            "transaction.version. Local controller 0 only supports versions 0-2") in res.stdout, (
        res.describe())

    res = _features(bootstrap, "upgrade", "--feature", "transaction.version=2").check()
    assert "transaction.version was upgraded to 2." in res.stdout, res.describe()


def test_kafka_features_turns_share_groups_off_and_on(broker):
    """share.version=0 withdraws the share APIs (a share member's heartbeat gets
    UNSUPPORTED_VERSION), 1 brings them back."""
    bootstrap = broker.bootstrap
    with WireClient(bootstrap) as w:
        assert w.call(10, 3, {"key": "sg", "key_type": 0}).error_code == 0
        assert _hb(w, "sg", uuid.uuid4().hex, 0).error_code == 0
    res = _features(bootstrap, "downgrade", "--feature", "share.version=0").check()
    assert "share.version was downgraded to 0." in res.stdout, res.describe()
    res = _features(bootstrap, "describe").check()
    assert ("Feature: share.version SupportedMinVersion: 0 SupportedMaxVersion: 1 "
            "FinalizedVersionLevel: 0 Epoch: 1") in _described(res), res.describe()
    with WireClient(bootstrap) as w:
        assert _hb(w, "sg", uuid.uuid4().hex, 0).error_code == 35  # UNSUPPORTED_VERSION
    res = _features(bootstrap, "upgrade", "--feature", "share.version=1").check()
    assert "share.version was upgraded to 1." in res.stdout, res.describe()
    with WireClient(bootstrap) as w:
        assert _hb(w, "sg", uuid.uuid4().hex, 0).error_code == 0
