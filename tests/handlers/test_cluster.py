"""The cluster's own description and features: ApiVersions (18), DescribeCluster (60),
UpdateFeatures (57)."""

from __future__ import annotations

from samsa.protocol.errors import ErrorCode

from .harness import ALICE

UPGRADE, SAFE_DOWNGRADE = 1, 2


async def test_api_versions_lists_every_served_api(handlers):
    r = await handlers.call("ApiVersions", 3, {"client_software_name": "t",
                                               "client_software_version": "1"})
    keys = {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}
    assert r.error_code == ErrorCode.none
    assert keys[0] == (0, 13)  # Produce: v0 advertised, v3+ served (KAFKA-18659)
    assert keys[18] == (0, 5)
    assert 7 not in keys  # ControlledShutdown: between brokers only, not advertised
    assert {f.name for f in r.finalized_features} >= {"transaction.version", "group.version"}


async def test_api_versions_v0_has_no_features(handlers):
    r = await handlers.call("ApiVersions", 0)
    assert r.error_code == ErrorCode.none and len(r.api_keys) > 40
    assert not hasattr(r, "finalized_features")


async def test_api_versions_v5_checks_the_cluster_and_node_the_client_names(handlers):
    """KIP-1242: a client that names another cluster, or this cluster and another node, must
    bootstrap again (REBOOTSTRAP_REQUIRED, no API table); one that names none is answered."""
    cluster = handlers.broker.store.cluster_id

    async def call(cluster_id: str | None, node_id: int):
        return await handlers.call("ApiVersions", 5, {
            "client_software_name": "t", "client_software_version": "1",
            "cluster_id": cluster_id, "node_id": node_id})

    for cluster_id, node_id in ((None, -1), (None, 7), (cluster, 0)):
        r = await call(cluster_id, node_id)
        assert r.error_code == ErrorCode.none and len(r.api_keys) > 40, (cluster_id, node_id)
    for cluster_id, node_id in (("another", 0), (cluster, 7), (cluster, -1)):
        r = await call(cluster_id, node_id)
        assert (r.error_code, r.api_keys) == (ErrorCode.rebootstrap_required, ()), (
            cluster_id, node_id)


async def test_describe_cluster(handlers):
    r = await handlers.call("DescribeCluster", 1, {"include_cluster_authorized_operations": True,
                                                   "endpoint_type": 1})
    assert (r.error_code, r.controller_id, r.cluster_id) == (
        ErrorCode.none, 0, handlers.broker.store.cluster_id)
    assert [(b.broker_id, b.host, b.port) for b in r.brokers] == [(0, "127.0.0.1", 9092)]
    assert r.cluster_authorized_operations > 0  # no authorizer: every operation


async def test_describe_cluster_v2_says_which_brokers_are_fenced(handlers):
    """KIP-1073: a registered broker is a live one, so none is fenced, asked for or not."""
    for include in (False, True):
        r = await handlers.call("DescribeCluster", 2, {
            "include_cluster_authorized_operations": False, "endpoint_type": 1,
            "include_fenced_brokers": include})
        assert r.error_code == ErrorCode.none
        assert [(b.broker_id, b.port, b.is_fenced) for b in r.brokers] == [(0, 9092, False)]


async def test_describe_cluster_serves_only_broker_endpoints(handlers):
    """KIP-919: a broker answers a request for the controllers' endpoints, or for an unknown
    kind, with an error and nothing else."""
    async def call(endpoint_type: int):
        return await handlers.call("DescribeCluster", 1, {
            "include_cluster_authorized_operations": False, "endpoint_type": endpoint_type})

    controllers, unknown = await call(2), await call(7)
    assert (controllers.error_code, controllers.error_message, controllers.brokers) == (
        ErrorCode.mismatched_endpoint_type, "The request was sent to an endpoint of type BROKER,"
        " but we wanted an endpoint of type CONTROLLER", ())
    assert (unknown.error_code, unknown.error_message) == (
        ErrorCode.unsupported_endpoint_type, "Unsupported endpoint type 7")


async def test_update_features(handlers):
    down = await handlers.call("UpdateFeatures", 1, {"timeout": 5000, "feature_updates": [
        {"feature": "transaction.version", "max_version_level": 1,
         "upgrade_type": SAFE_DOWNGRADE}], "validate_only": False})
    levels = handlers.broker.store.finalized_features().levels
    assert (down.error_code, levels["transaction.version"]) == (ErrorCode.none, 1)
    too_high = await handlers.call("UpdateFeatures", 1, {"timeout": 5000, "feature_updates": [
        {"feature": "transaction.version", "max_version_level": 99, "upgrade_type": UPGRADE}],
        "validate_only": False})
    twice = await handlers.call("UpdateFeatures", 1, {"timeout": 5000, "feature_updates": [
        {"feature": "group.version", "max_version_level": 1, "upgrade_type": UPGRADE}] * 2,
        "validate_only": False})
    assert too_high.error_code == ErrorCode.invalid_update_version
    assert twice.error_code == ErrorCode.invalid_request


async def test_cluster_authorization_failed(secured):
    r = await secured.call("UpdateFeatures", 1, {"timeout": 5000, "feature_updates": [
        {"feature": "group.version", "max_version_level": 1, "upgrade_type": UPGRADE}],
        "validate_only": False}, principal=ALICE)
    described = await secured.call("DescribeCluster", 1, {
        "include_cluster_authorized_operations": True, "endpoint_type": 1}, principal=ALICE)
    assert r.error_code == ErrorCode.cluster_authorization_failed
    assert described.cluster_authorized_operations == 0
