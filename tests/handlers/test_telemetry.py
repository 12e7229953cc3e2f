"""Client telemetry (KIP-714): CLIENT_METRICS config resources, GetTelemetrySubscriptions (71),
PushTelemetry (72) and ListConfigResources (74), and the pushed metrics on /metrics, as
Kafka's ClientMetricsManager answers them."""

from __future__ import annotations

import gzip
import uuid

from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    AggregationTemporality,
    Gauge,
    Metric,
    MetricsData,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
    Sum,
)

from samsa.broker import metrics_endpoint
from samsa.broker.telemetry.manager import subscription_id
from samsa.protocol import compression
from samsa.protocol.errors import ErrorCode

from .harness import ADMIN, ALICE

CLIENT_METRICS = 16
SET, DELETE = 0, 1
GZIP, ZSTD, LZ4, SNAPPY = 1, 4, 3, 2


async def _alter(h, name: str, ops: list[tuple[int, str, str | None]], **kw) -> tuple:
    r = await h.call("IncrementalAlterConfigs", 1, {"resources": [{
        "resource_type": CLIENT_METRICS, "resource_name": name,
        "configs": [{"name": k, "config_operation": op, "value": v} for op, k, v in ops]}],
        "validate_only": False}, **kw)
    return r.responses[0].error_code, r.responses[0].error_message


async def _subscribe(h, name: str, **configs: str) -> None:
    ops = [(SET, k.replace("_", "."), v) for k, v in configs.items()]
    assert await _alter(h, name, ops) == (ErrorCode.none, None)


async def _get(h, instance_id: uuid.UUID | None = None):
    return await h.call("GetTelemetrySubscriptions", 0, {"client_instance_id": instance_id})


async def _push(h, instance_id, sub_id, payload: bytes, compression: int = GZIP,
                terminating: bool = False):
    r = await h.call("PushTelemetry", 0, {
        "client_instance_id": instance_id, "subscription_id": sub_id,
        "terminating": terminating, "compression_type": compression, "metrics": payload})
    return r.error_code


def _otlp(queue_time: float, sent: int) -> bytes:
    attrs = [KeyValue(key="node.id", value=AnyValue(string_value="1"))]
    data = MetricsData(resource_metrics=[ResourceMetrics(scope_metrics=[ScopeMetrics(metrics=[
        Metric(name="org.apache.kafka.producer.record.queue.time.avg", gauge=Gauge(
            data_points=[NumberDataPoint(as_double=queue_time, attributes=attrs)])),
        Metric(name="org.apache.kafka.producer.node.request.count", sum=Sum(
            is_monotonic=True,
            aggregation_temporality=AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA,
            data_points=[NumberDataPoint(as_int=sent, attributes=attrs)])),
    ])])])
    return data.SerializeToString()


async def test_no_subscription_asks_for_nothing(handlers):
    r = await _get(handlers)
    assert r.error_code == ErrorCode.none
    assert r.client_instance_id is not None and r.client_instance_id.int != 0
    assert list(r.requested_metrics) == []
    assert r.push_interval.total_seconds() == 300
    assert list(r.accepted_compression_types) == [ZSTD, LZ4, GZIP, SNAPPY]
    assert r.telemetry_max_bytes == 1048576 and r.delta_temporality
    assert r.subscription_id == subscription_id([], 300000, r.client_instance_id)


async def test_matching_subscriptions_give_metrics_and_the_shortest_interval(handlers):
    await _subscribe(handlers, "producers", metrics="org.apache.kafka.producer.",
                     interval_ms="2000", match="client_id=handler-.*")
    await _subscribe(handlers, "latency", metrics="org.apache.kafka.consumer.fetch",
                     interval_ms="1000")
    await _subscribe(handlers, "others", metrics="org.apache.kafka.admin.",
                     interval_ms="500", match="client_id=someone-else")
    r = await _get(handlers)
    assert r.error_code == ErrorCode.none
    assert list(r.requested_metrics) == ["org.apache.kafka.consumer.fetch",
                                         "org.apache.kafka.producer."]
    assert r.push_interval.total_seconds() == 1.0
    # a subscription asking for all ("*") makes it all
    await _subscribe(handlers, "all", metrics="*")
    again = await _get(handlers, r.client_instance_id)
    assert again.error_code == ErrorCode.none  # the subscriptions changed: not throttled
    assert list(again.requested_metrics) == ["*"]
    assert again.subscription_id != r.subscription_id


async def test_subscription_validation(handlers):
    code, msg = await _alter(handlers, "s", [(SET, "interval.ms", "50")])
    assert code == ErrorCode.invalid_request and "between 100 and 3600000" in msg
    code, msg = await _alter(handlers, "s", [(SET, "color", "red")])
    assert (code, msg) == (ErrorCode.invalid_request,
                           "Unknown client metrics configuration: color")
    code, msg = await _alter(handlers, "s", [(SET, "match", "hostname=x")])
    assert (code, msg) == (ErrorCode.invalid_config, "Illegal client matching pattern: hostname=x")
    code, _ = await _alter(handlers, "s", [(SET, "match", "client_id=[")])
    assert code == ErrorCode.invalid_config
    code, _ = await _alter(handlers, "s", [(SET, "metrics", "a.,b.,a.")])
    assert code == ErrorCode.invalid_config
    # the regex is what follows the first '='
    assert await _alter(handlers, "s", [(SET, "match", "client_id=a=b")]) == (
        ErrorCode.none, None)
    code, _ = await _alter(handlers, "s", [(SET, "metrics", "a")], principal=ALICE)
    assert code == ErrorCode.none  # no authorizer: allowed
    assert await _alter(handlers, "", [(SET, "metrics", "a")]) == (
        ErrorCode.invalid_request, "Subscription name can't be empty")


async def test_describe_list_and_delete(handlers):
    await _subscribe(handlers, "sub1", metrics="a.,b.", interval_ms="1000")
    await _subscribe(handlers, "sub2", match="client_software_name=apache-kafka-java")
    d = await handlers.call("DescribeConfigs", 4, {"resources": [{
        "resource_type": CLIENT_METRICS, "resource_name": "sub1", "configuration_keys": None}],
        "include_synonyms": False, "include_documentation": False})
    assert {(c.name, c.value, c.config_source) for c in d.results[0].configs} == {
        ("metrics", "a.,b.", 7), ("interval.ms", "1000", 7), ("match", "", 5)}
    v0 = await handlers.call("ListConfigResources", 0, {})
    assert [c.resource_name for c in v0.config_resources] == ["sub1", "sub2"]
    v1 = await handlers.call("ListConfigResources", 1, {"resource_types": [CLIENT_METRICS]})
    assert [(c.resource_name, c.resource_type) for c in v1.config_resources] == [
        ("sub1", CLIENT_METRICS), ("sub2", CLIENT_METRICS)]
    await handlers.create_topic("t1")
    every = await handlers.call("ListConfigResources", 1, {"resource_types": []})
    assert ("t1", 2) in {(c.resource_name, c.resource_type) for c in every.config_resources}
    assert {("0", 4), ("0", 8)} <= {(c.resource_name, c.resource_type)
                                    for c in every.config_resources}
    bad = await handlers.call("ListConfigResources", 1, {"resource_types": [1]})
    assert bad.error_code == ErrorCode.unsupported_version
    assert await _alter(handlers, "sub1", [(DELETE, "metrics", None),
                                           (DELETE, "interval.ms", None)]) == (
        ErrorCode.none, None)
    v0 = await handlers.call("ListConfigResources", 0, {})
    assert [c.resource_name for c in v0.config_resources] == ["sub2"]


async def test_push_errors_as_kafka(handlers):
    await _subscribe(handlers, "all", metrics="*", interval_ms="60000")
    r = await _get(handlers)
    iid, sub = r.client_instance_id, r.subscription_id
    assert (await _get(handlers, iid)).error_code == ErrorCode.throttling_quota_exceeded
    assert await _push(handlers, iid, sub + 1, _otlp(1.0, 1)) == ErrorCode.unknown_subscription_id
    # after an unknown subscription the client may ask again at once
    assert (await _get(handlers, iid)).error_code == ErrorCode.none
    r = await _get(handlers)
    iid, sub = r.client_instance_id, r.subscription_id
    assert await _push(handlers, iid, sub, gzip.compress(_otlp(1.0, 1))) == ErrorCode.none
    assert await _push(handlers, iid, sub, _otlp(1.0, 1)) == (
        ErrorCode.throttling_quota_exceeded)
    r = await _get(handlers, uuid.uuid4())
    iid, sub = r.client_instance_id, r.subscription_id
    assert await _push(handlers, iid, sub, b"x", compression=9) == (
        ErrorCode.unsupported_compression_type)
    assert (await _get(handlers, iid)).error_code == ErrorCode.none
    r = await _get(handlers)
    assert await _push(handlers, r.client_instance_id, r.subscription_id, b"\xff\xff\xff",
                       compression=0) == ErrorCode.invalid_record
    r = await _get(handlers)
    iid, sub = r.client_instance_id, r.subscription_id
    big = gzip.compress(b"\0" * (2 << 20))  # inflates past telemetry.max.bytes
    assert await _push(handlers, iid, sub, big) == ErrorCode.telemetry_too_large
    # a terminating push is taken even early; nothing after it
    assert await _push(handlers, iid, sub, b"", terminating=True) == ErrorCode.none
    assert await _push(handlers, iid, sub, b"", terminating=True) == ErrorCode.invalid_request
    assert await _push(handlers, uuid.UUID(int=0), sub, b"") == ErrorCode.invalid_request


async def test_pushed_metrics_on_the_metrics_endpoint(handlers):
    await _subscribe(handlers, "all", metrics="*", interval_ms="100")
    r = await _get(handlers)
    iid, sub = r.client_instance_id, r.subscription_id
    assert await _push(handlers, iid, sub, gzip.compress(_otlp(2.5, 3))) == ErrorCode.none
    telemetry = handlers.broker.telemetry
    telemetry.instances[iid].last_push_ms -= 1000  # a push interval later
    assert await _push(handlers, iid, sub, _otlp(4.0, 2), compression=0) == ErrorCode.none
    families = {f.name: f for f in metrics_endpoint.client_telemetry(handlers.broker)}
    gauge = families["org_apache_kafka_producer_record_queue_time_avg"]
    (sample,) = gauge.samples
    assert sample.value == 4.0
    assert sample.labels == {"node_id": "1", "client_instance_id": str(iid),
                             "client_id": "handler-test", "client_software_name": "",
                             "client_software_version": "",
                             "client_source_address": "127.0.0.1",
                             "client_source_port": "50000"}
    counter = families["org_apache_kafka_producer_node_request_count"]
    assert counter.type == "counter"
    assert [(s.name, s.value) for s in counter.samples] == [
        ("org_apache_kafka_producer_node_request_count_total", 5.0)]  # deltas added up
    # the connection closes: the instance ends (a new one would start over) but its metrics
    # stay until it expires
    telemetry.connection_closed("PLAINTEXT", "127.0.0.1:50000")
    assert telemetry.instances[iid].closed
    assert len(metrics_endpoint.client_telemetry(handlers.broker)) == 2
    telemetry.expire(telemetry.instances[iid].expires_ms)
    assert metrics_endpoint.client_telemetry(handlers.broker) == []
    assert iid not in telemetry.instances


async def test_match_on_the_software_apiversions_named(handlers):
    await _subscribe(handlers, "java", metrics="org.apache.kafka.producer.",
                     match="client_software_name=apache-kafka-java,client_software_version=4\\..*")
    assert list((await _get(handlers)).requested_metrics) == []  # unnamed: no match
    r = await handlers.call("ApiVersions", 3, {"client_software_name": "apache-kafka-java",
                                               "client_software_version": "4.3.1"})
    assert r.error_code == ErrorCode.none
    assert list((await _get(handlers)).requested_metrics) == ["org.apache.kafka.producer."]
    await handlers.call("ApiVersions", 3, {"client_software_name": "apache-kafka-java",
                                           "client_software_version": "3.9.1"})
    assert list((await _get(handlers)).requested_metrics) == []


async def test_subscriptions_need_cluster_configs_acls(secured):
    code, _ = await _alter(secured, "s", [(SET, "metrics", "a.")], principal=ALICE)
    assert code == ErrorCode.cluster_authorization_failed
    assert await _alter(secured, "s", [(SET, "metrics", "a.")], principal=ADMIN) == (
        ErrorCode.none, None)
    denied = await secured.call("ListConfigResources", 1, {"resource_types": []},
                                principal=ALICE)
    assert denied.error_code == ErrorCode.cluster_authorization_failed
    assert not denied.config_resources
    listed = await secured.call("ListConfigResources", 0, {}, principal=ADMIN)
    assert [c.resource_name for c in listed.config_resources] == ["s"]


async def test_every_accepted_compression_decodes(handlers):
    await _subscribe(handlers, "all", metrics="*", interval_ms="100")
    for codec in (ZSTD, LZ4, GZIP, SNAPPY):
        r = await _get(handlers)
        payload = compression.compress(codec, _otlp(float(codec), 1))
        assert await _push(handlers, r.client_instance_id, r.subscription_id, payload,
                           compression=codec) == ErrorCode.none, codec
        values = handlers.broker.telemetry.instances[r.client_instance_id].exported.values
        gauge = values[("org_apache_kafka_producer_record_queue_time_avg", "gauge")]
        assert list(gauge.values()) == [float(codec)]


async def test_an_expired_instance_starts_over(handlers):
    await _subscribe(handlers, "all", metrics="*", interval_ms="60000")
    r = await _get(handlers)
    iid, sub = r.client_instance_id, r.subscription_id
    assert await _push(handlers, iid, sub, _otlp(1.0, 1), compression=0) == ErrorCode.none
    telemetry = handlers.broker.telemetry
    telemetry.instances[iid].expires_ms = 0  # 3 push intervals without a request
    # its metrics are gone and the client starts over: asking at once is not throttled
    again = await _get(handlers, iid)
    assert again.error_code == ErrorCode.none and again.subscription_id == sub
    assert telemetry.instances[iid].exported.values == {}


async def test_names_prometheus_refuses_are_left_out(handlers):
    await _subscribe(handlers, "all", metrics="*", interval_ms="100")
    r = await _get(handlers)
    data = MetricsData(resource_metrics=[ResourceMetrics(scope_metrics=[ScopeMetrics(metrics=[
        Metric(name="", gauge=Gauge(data_points=[NumberDataPoint(as_double=1.0)])),
        Metric(name="__reserved", gauge=Gauge(data_points=[NumberDataPoint(as_double=1.0)])),
        Metric(name="7.up", gauge=Gauge(data_points=[NumberDataPoint(
            as_int=7, attributes=[KeyValue(key="", value=AnyValue(string_value="x")),
                                  KeyValue(key="a-b", value=AnyValue(int_value=3))])])),
    ])])])
    assert await _push(handlers, r.client_instance_id, r.subscription_id,
                       data.SerializeToString(), compression=0) == ErrorCode.none
    (family,) = metrics_endpoint.client_telemetry(handlers.broker)
    assert family.name == "_7_up"
    assert family.samples[0].labels["a_b"] == "3" and "" not in family.samples[0].labels


async def test_list_config_resources_names_a_group_that_has_only_configs(handlers):
    # kafka-configs --entity-type groups --describe asks ListConfigResources first and says
    # the group does not exist unless it is listed; a group's configs can be set before any
    # member joins.
    r = await handlers.call("IncrementalAlterConfigs", 1, {"resources": [{
        "resource_type": 32, "resource_name": "lonely", "configs": [
            {"name": "consumer.heartbeat.interval.ms", "config_operation": 0,
             "value": "6000"}]}], "validate_only": False})
    assert r.responses[0].error_code == ErrorCode.none
    listed = await handlers.call("ListConfigResources", 1, {"resource_types": [32]})
    assert [(c.resource_name, c.resource_type) for c in listed.config_resources] == [
        ("lonely", 32)]
