"""The transaction coordinator (transactions v1): state in `__transaction_state`, markers."""

from .coordinator import TransactionCoordinator
from .metadata import TxnMetadata, TxnState

__all__ = ["TransactionCoordinator", "TxnMetadata", "TxnState"]
