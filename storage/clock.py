"""The wall clock the storage layer stamps and ages things by (Kafka's Time.milliseconds)."""

from __future__ import annotations

import time


def milliseconds() -> int:
    """Milliseconds since the epoch."""
    return int(time.time() * 1000)
