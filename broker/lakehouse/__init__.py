"""Iceberg topics (docs/lakehouse.md): the committed records of a topic with samsa.iceberg.mode
set, written into an Iceberg table, each Kafka transaction in one Iceberg commit."""

from .service import Lakehouse

__all__ = ["Lakehouse"]
