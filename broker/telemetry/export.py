"""A client instance's pushed metrics: the PushTelemetry payload (OTLP MetricsData protobuf,
compressed as the client chose) decoded and kept, latest value per metric and attributes, for
/metrics. Kafka hands the payload to a plugin; here the broker's own exporter is the plugin.

Sums come as deltas (GetTelemetrySubscriptions asks for delta temporality, as Kafka does) and
are added up into totals; cumulative sums and gauges are taken as they come; a histogram or a
summary is kept as its count and sum.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from google.protobuf.message import DecodeError  # type: ignore[import-untyped]
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import AggregationTemporality, MetricsData

from samsa.protocol.compression import InflatedTooLarge, decompress
from samsa.protocol.errors import CorruptRecord, ErrorCode, InvalidRecord, KafkaError

GAUGE, COUNTER = "gauge", "counter"
Labels = tuple[tuple[str, str], ...]
_NOT_NAME = re.compile(r"[^a-zA-Z0-9_]")
_DELTA = AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA


class PayloadError(KafkaError):
    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message, error_code)


def prometheus_name(name: str) -> str:
    """An OTLP metric or attribute name as a Prometheus one (dots and dashes to '_')."""
    out = _NOT_NAME.sub("_", name)
    return "_" + out if out[:1].isdigit() else out


def _text(value: AnyValue) -> str:
    kind = value.WhichOneof("value")
    return "" if kind is None else str(getattr(value, kind))


def _labels(attributes: list[KeyValue]) -> Labels:
    """The point's attributes as labels (one with no name Prometheus takes left out)."""
    pairs = {(prometheus_name(a.key), _text(a.value)) for a in attributes}
    return tuple(sorted((k, v) for k, v in pairs if k and not k.startswith("__")))


def _number(point: object) -> float:
    kind = point.WhichOneof("value")  # type: ignore[attr-defined]
    return float(getattr(point, kind)) if kind is not None else 0.0


@dataclass(slots=True)
class ClientMetrics:
    """The latest values of one client instance's metrics: (name, kind) -> labels -> value."""

    values: dict[tuple[str, str], dict[Labels, float]] = field(default_factory=dict)

    def update(self, compression: int, payload: bytes, max_bytes: int) -> None:
        """Decode a push (TELEMETRY_TOO_LARGE past `max_bytes` inflated, INVALID_RECORD for
        a payload that does not decode) and take its points."""
        try:
            raw = decompress(compression, payload, max_bytes)
        except InflatedTooLarge as exc:
            raise PayloadError(ErrorCode.telemetry_too_large, str(exc)) from exc
        except (CorruptRecord, InvalidRecord) as exc:
            raise PayloadError(ErrorCode.invalid_record, str(exc)) from exc
        if len(raw) > max_bytes:
            raise PayloadError(ErrorCode.telemetry_too_large,
                               f"Telemetry payload inflates to more than {max_bytes} bytes")
        data = MetricsData()
        try:
            data.ParseFromString(bytes(raw))
        except DecodeError as exc:
            raise PayloadError(ErrorCode.invalid_record,
                               f"Telemetry payload is not OTLP MetricsData: {exc}") from exc
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    self._take(metric)

    def _set(self, name: str, kind: str, labels: Labels, value: float, add: bool) -> None:
        points = self.values.setdefault((name, kind), {})
        points[labels] = points.get(labels, 0.0) + value if add else value

    def _take(self, metric: object) -> None:
        name = prometheus_name(metric.name)  # type: ignore[attr-defined]
        if not name or name.startswith("__"):
            return  # no name Prometheus takes (a scrape would fail on it): not kept
        which = metric.WhichOneof("data")  # type: ignore[attr-defined]
        if which == "gauge":
            for p in metric.gauge.data_points:  # type: ignore[attr-defined]
                self._set(name, GAUGE, _labels(p.attributes), _number(p), add=False)
        elif which == "sum":
            s = metric.sum  # type: ignore[attr-defined]
            kind = COUNTER if s.is_monotonic else GAUGE
            delta = s.aggregation_temporality == _DELTA
            for p in s.data_points:
                self._set(name, kind, _labels(p.attributes), _number(p), add=delta)
        elif which in ("histogram", "summary"):
            delta = which == "histogram" and (
                metric.histogram.aggregation_temporality == _DELTA)  # type: ignore[attr-defined]
            for p in getattr(metric, which).data_points:
                labels = _labels(p.attributes)
                self._set(name + "_count", COUNTER, labels, float(p.count), add=delta)
                self._set(name + "_sum", COUNTER, labels, float(p.sum), add=delta)

    def samples(self) -> Iterator[tuple[str, str, Labels, float]]:
        for (name, kind), points in self.values.items():
            for labels, value in points.items():
                yield name, kind, labels, value
