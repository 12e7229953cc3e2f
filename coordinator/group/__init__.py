"""Group coordinator: classic consumer groups and committed offsets (__consumer_offsets)."""

from .coordinator import GroupCoordinator, GroupError, OffsetCommitEntry

__all__ = ["GroupCoordinator", "GroupError", "OffsetCommitEntry"]
