"""Group coordinator: classic and consumer-protocol (KIP-848) consumer groups and committed
offsets (__consumer_offsets)."""

from .common import GroupError, OffsetCommitEntry
from .coordinator import GroupCoordinator

__all__ = ["GroupCoordinator", "GroupError", "OffsetCommitEntry"]
