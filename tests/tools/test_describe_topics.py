"""`kafka-topics --describe` of Kafka 4.x: DescribeTopicPartitions, a page at a time."""

from __future__ import annotations

import re
import urllib.request

from samsa.protocol.uuids import kafka_uuid_string
from tests.protocol.wire import WireClient
from tests.support.broker import free_port
from tests.support.java import run_java_tool


def _requests(port: int, api: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("kafka_network_requestmetrics_requestspersec_total{")
               and f'request="{api}"' in line)


def test_kafka_topics_describe_pages_through_partitions(broker_factory, unique_topic):
    port = free_port()
    b = broker_factory({"metrics.port": port})
    res = run_java_tool("org.apache.kafka.tools.TopicCommand", [
        "--bootstrap-server", b.bootstrap, "--create", "--topic", unique_topic,
        "--partitions", "5", "--replication-factor", "1"]).check()
    with WireClient(b.bootstrap) as c:
        topic_id = c.call(3, 12, {"topics": [{"name": unique_topic}],
                                  "allow_auto_topic_creation": False}).topics[0].topic_id
    res = run_java_tool("org.apache.kafka.tools.TopicCommand", [
        "--bootstrap-server", b.bootstrap, "--describe", "--topic", unique_topic,
        "--partition-size-limit-per-response", "2"]).check()
    kafka_id = kafka_uuid_string(topic_id)
    assert re.search(rf"Topic:\s*{re.escape(unique_topic)}\s+TopicId:\s*{re.escape(kafka_id)}"
                     r"\s+PartitionCount:\s*5", res.stdout), res.stdout
    partitions = re.findall(rf"Topic:\s*{re.escape(unique_topic)}\s+Partition:\s*(\d+)\s+"
                            r"Leader:\s*0\s+Replicas:\s*0\s+Isr:\s*0", res.stdout)
    assert partitions == ["0", "1", "2", "3", "4"], res.stdout
    # Three pages of at most two partitions, not a Metadata request.
    assert _requests(port, "DescribeTopicPartitions") >= 3
