"""TransactionLogValue v1 (flexible, tagged PreviousProducerId/NextProducerId/
ClientTransactionVersion): written field by field as Kafka's schema lays it out, read back."""

from __future__ import annotations

import struct

from samsa.coordinator.transaction.log import TxnLogValue, decode_value, encode_value


def test_value_v1_round_trip_with_tagged_fields():
    v = TxnLogValue(1000, 7, 60_000, 1, (("a", 0), ("a", 2), ("b", 1)), 1234, 1200,
                    previous_producer_id=999, next_producer_id=1001,
                    client_transaction_version=2)
    raw = encode_value(v, 1)
    assert raw[:2] == b"\x00\x01"
    assert decode_value(raw) == v
    # Only non-default tagged fields are written: three here, none for the defaults.
    plain = TxnLogValue(1000, 7, 60_000, 1, (("a", 0),), 1234, 1200)
    raw_plain = encode_value(plain, 1)
    assert raw_plain.endswith(struct.pack(">qq", 1234, 1200) + b"\x00")
    assert decode_value(raw_plain) == plain
    assert raw.endswith(b"\x03" + b"\x00\x08" + struct.pack(">q", 999) + b"\x01\x08"
                        + struct.pack(">q", 1001) + b"\x02\x02" + struct.pack(">h", 2))
    # Version 0 stays the default and keeps its layout (no tagged fields).
    v = TxnLogValue(1000, 7, 60_000, 0, (), 1234, -1)
    raw = encode_value(v)
    assert raw == struct.pack(">hqhibiqq", 0, 1000, 7, 60_000, 0, 0, 1234, -1)
    assert decode_value(raw) == v
