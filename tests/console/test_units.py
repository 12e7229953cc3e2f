"""The console's own small functions, without a browser: the Prometheus counters the
throughput chart adds up, and how keys and values are shown."""

from __future__ import annotations

from samsa.broker.console.app import sum_counters
from samsa.broker.console.html import decode, size

METRICS = """\
# HELP kafka_server_brokertopicmetrics_bytesinpersec_total Bytes appended by producers.
# TYPE kafka_server_brokertopicmetrics_bytesinpersec_total counter
kafka_server_brokertopicmetrics_bytesinpersec_total{topic="a"} 100.0
kafka_server_brokertopicmetrics_bytesinpersec_total{topic="b"} 2.5e3
kafka_server_brokertopicmetrics_bytesinpersec_created{topic="a"} 1.7e9
kafka_server_brokertopicmetrics_bytesoutpersec_total{listener="x",topic="a"} 7.0
kafka_server_brokertopicmetrics_messagesinpersec_total{topic="b"} 3.0
kafka_network_requestmetrics_requestspersec_total{request="Produce",version="9"} 5.0
"""


def test_counters_summed_over_topics_and_per_topic() -> None:
    found = sum_counters(METRICS)
    assert (found["bytes_in"], found["bytes_out"], found["records_in"]) == (2600.0, 7.0, 3.0)
    assert found["topics"] == {
        "a": {"bytes_in": 100.0, "bytes_out": 7.0, "records_in": 0.0},
        "b": {"bytes_in": 2500.0, "bytes_out": 0.0, "records_in": 3.0}}


def test_decode_as_text_json_and_hex() -> None:
    assert decode(b'{"a": [1, 2]}', "json") == '{\n  "a": [\n    1,\n    2\n  ]\n}'
    assert decode(b"not json", "json") == "not json"
    assert decode("é".encode() + b"\xff", "text") == "é\ufffd"
    assert decode(b"\x00\xab", "hex") == "00 ab"
    assert decode(None, "text") == "null"


def test_sizes() -> None:
    assert [size(n) for n in (None, -1, 0, 1023, 1024, 5 * 1024**3)] == [
        "", "", "0 B", "1023 B", "1.0 KiB", "5.0 GiB"]
