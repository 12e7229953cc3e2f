"""Transaction properties (Kafka's TransactionLogConfig and TransactionStateManagerConfig)."""

from __future__ import annotations

from samsa.config.schema.property_def import G_TXN, SH, B, I, PropertyDef, prop
from samsa.config.schema.validators import at_least

TRANSACTIONS: list[PropertyDef] = [
    prop("transaction.state.log.num.partitions", I, 50, "Partitions of __transaction_state.",
         at_least(1), group=G_TXN),
    prop("transaction.state.log.replication.factor", SH, 3, "Replication factor of "
         "__transaction_state.", at_least(1), group=G_TXN),
    prop("transaction.state.log.min.isr", I, 2, "min.insync.replicas of __transaction_state "
         "(capped at the replication factor it is created with).", at_least(1), group=G_TXN),
    prop("transaction.state.log.segment.bytes", I, 104857600, "Segment size of "
         "__transaction_state.", at_least(1), group=G_TXN),
    prop("transaction.state.log.load.buffer.size", I, 5242880, "Bytes read at a time "
         "when loading transaction state (a larger batch is still read whole).", at_least(1),
         group=G_TXN),
    prop("transaction.max.timeout.ms", I, 900000, "Largest transaction timeout a producer may "
         "ask for.", at_least(1), group=G_TXN),
    prop("transactional.id.expiration.ms", I, 604800000, "A transactional id with no activity "
         "for this long expires.", at_least(1), group=G_TXN),
    prop("transaction.abort.timed.out.transaction.cleanup.interval.ms", I, 10000, "How often "
         "timed-out transactions are aborted.", at_least(1), group=G_TXN),
    prop("transaction.remove.expired.transaction.cleanup.interval.ms", I, 3600000, "How often "
         "expired transactional ids are removed.", at_least(1), group=G_TXN),
    prop("transaction.partition.verification.enable", B, True, "Check that a partition was added "
         "to the transaction before a transactional write.", group=G_TXN),
    prop("producer.id.expiration.ms", I, 86400000, "Producer-id state of an idle idempotent "
         "producer expires after this.", at_least(1), group=G_TXN),
    prop("producer.id.expiration.check.interval.ms", I, 600000, "How often expired producer ids "
         "are removed.", at_least(1), group=G_TXN),
    # Kafka's AddPartitionsToTxnConfig: a transactions-v2 Produce adds its partitions to the
    # transaction itself; while the coordinator still finishes the previous transaction
    # (CONCURRENT_TRANSACTIONS) the leader retries instead of answering the client.
    prop("add.partitions.to.txn.retry.backoff.max.ms", I, 100, "The maximum allowed timeout "
         "for adding partitions to transactions on the server side. It only applies to the "
         "actual add partition operations, not the verification. It will not be effective if "
         "it is larger than request.timeout.ms", at_least(0), group=G_TXN),
    prop("add.partitions.to.txn.retry.backoff.ms", I, 20, "The server-side retry backoff when "
         "the server attempts to add the partition to the transaction", at_least(1),
         group=G_TXN),
]
