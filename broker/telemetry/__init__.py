"""KIP-714 client telemetry: subscriptions (CLIENT_METRICS config resources), client instances
and their pushes (manager.py), the pushed metrics kept for /metrics (export.py)."""

from .manager import TelemetryError, TelemetryManager
from .subscriptions import SubscriptionError

__all__ = ["SubscriptionError", "TelemetryError", "TelemetryManager"]
