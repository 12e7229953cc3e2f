"""kafka-features (org.apache.kafka.tools.FeatureCommand, Kafka 4.x) against Samsa: describe
reads ApiVersions' feature levels, upgrade/downgrade send UpdateFeatures."""

from __future__ import annotations

from tests.support.java import JavaResult, run_java_tool

FEATURE_COMMAND = "org.apache.kafka.tools.FeatureCommand"


def _features(bootstrap: str, *args: str) -> JavaResult:
    return run_java_tool(FEATURE_COMMAND, ["--bootstrap-server", bootstrap, *args])


def _described(res: JavaResult) -> list[str]:
    return [" ".join(line.split()) for line in res.stdout.splitlines() if line.strip()]


def test_kafka_features_describe_upgrade_downgrade(broker):
    bootstrap = broker.bootstrap
    res = _features(bootstrap, "describe").check()
    assert _described(res) == [  # a new cluster finalizes transactions v2, group.version 1
        "Feature: group.version SupportedMinVersion: 0 SupportedMaxVersion: 1 "
        "FinalizedVersionLevel: 1 Epoch: 0",
        "Feature: transaction.version SupportedMinVersion: 0 SupportedMaxVersion: 2 "
        "FinalizedVersionLevel: 2 Epoch: 0"], res.describe()

    res = _features(bootstrap, "downgrade", "--feature", "transaction.version=1").check()
    assert "transaction.version was downgraded to 1." in res.stdout, res.describe()
    res = _features(bootstrap, "describe").check()
    assert _described(res) == [
        "Feature: group.version SupportedMinVersion: 0 SupportedMaxVersion: 1 "
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
