"""The share coordinator (KIP-932): durable share-partition state in `__share_group_state`."""

from .coordinator import ShareStateCoordinator, coordinator_key

__all__ = ["ShareStateCoordinator", "coordinator_key"]
