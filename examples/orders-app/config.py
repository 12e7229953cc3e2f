"""The application's settings (a module named `config`, which Samsa's install leaves alone)."""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Settings:
    bootstrap_servers: str = os.environ.get("ORDERS_BOOTSTRAP", "127.0.0.1:9092")
    topic: str = "orders"
    group_id: str = "orders-app"
