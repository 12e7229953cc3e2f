"""A transaction coordinator that cannot load its partition serves nothing from it.

Serving the part it could read (or nothing) would hand out a fresh producer id to a
transactional id that has one, without fencing the old producer, and would never finish a
transaction left in PrepareCommit. The partition stays loading (COORDINATOR_LOAD_IN_PROGRESS,
which clients retry) and the load is retried, which the log says.
"""

from __future__ import annotations

import time
from pathlib import Path

from samsa.coordinator.internal_log import partition_for
from tests.support.broker import BrokerProcess

from .txnwire import TxnWire

COORDINATOR_LOAD_IN_PROGRESS = 14
TXN_PARTITIONS = 5
RECORDS_REGION = 61  # size of a record batch header: the first record's length follows


def _break_first_record(segment: Path) -> None:
    """Make the first record of the first batch unreadable (its length negative)."""
    data = bytearray(segment.read_bytes())
    assert len(data) > RECORDS_REGION, f"{segment} holds no batch"
    data[RECORDS_REGION] = 0x01  # zigzag varint -1: no record has a negative length
    segment.write_bytes(bytes(data))


def test_unreadable_transaction_log_is_retried_not_served(tmp_path: Path) -> None:
    txn_id = "load-failure-txn"
    settings = {"transaction.state.log.num.partitions": TXN_PARTITIONS}
    broker = BrokerProcess(tmp_path / "data", name="broker", settings=settings)
    broker.start()
    try:
        with TxnWire(broker.bootstrap) as c:
            first = c.init_until_ready(txn_id)
            assert first.error_code == 0
        broker.stop()  # clean: no recovery pass re-validates the batches on start
        p = partition_for(txn_id, TXN_PARTITIONS)
        _break_first_record(
            broker.data_dir / f"__transaction_state-{p}" / "00000000000000000000.log"
        )
        broker.start()
        answers = []
        deadline = time.monotonic() + 4
        with TxnWire(broker.bootstrap) as c:
            while time.monotonic() < deadline:
                r = c.init_pid(txn_id)
                answers.append((r.error_code, r.producer_id))
                time.sleep(0.2)
        assert all(code == COORDINATOR_LOAD_IN_PROGRESS for code, _ in answers), (
            f"the coordinator served a partition it could not load: {answers[:5]} "
            f"(first producer id was {first.producer_id})\n{broker.log_tail(20)}"
        )
        tail = broker.log_tail(200)
        assert f"loading __transaction_state-{p} failed (attempt 2)" in tail, tail
        assert broker.is_running()
    finally:
        broker.close()
