"""Kafka's own admin tools (kafka-tools 4.x from Maven Central) against a Samsa broker."""

from __future__ import annotations

import json

from confluent_kafka import Producer

from tests.support.java import run_java_tool

TOOLS = "org.apache.kafka.tools"


def _produce(bootstrap: str, topic: str, count: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        p.produce(topic, f"v{i}".encode())
    assert p.flush(30) == 0


def test_log_dirs_reports_partition_sizes(shared_broker, unique_topic):
    _produce(shared_broker.bootstrap, unique_topic, 10)
    res = run_java_tool(
        f"{TOOLS}.LogDirsCommand",
        ["--bootstrap-server", shared_broker.bootstrap, "--describe", "--topic-list", unique_topic],
    ).check()
    doc = json.loads(next(line for line in res.stdout.splitlines() if line.startswith("{")))
    (broker,) = doc["brokers"]
    (log_dir,) = broker["logDirs"]
    assert log_dir["error"] is None
    (partition,) = log_dir["partitions"]
    assert partition["partition"] == f"{unique_topic}-0"
    assert partition["size"] > 10 * 2


def test_delete_records_then_get_offsets(shared_broker, unique_topic, tmp_path):
    _produce(shared_broker.bootstrap, unique_topic, 10)
    spec = tmp_path / "delete.json"
    spec.write_text(
        json.dumps(
            {"version": 1, "partitions": [{"topic": unique_topic, "partition": 0, "offset": 4}]}
        )
    )
    res = run_java_tool(
        f"{TOOLS}.DeleteRecordsCommand",
        ["--bootstrap-server", shared_broker.bootstrap, "--offset-json-file", str(spec)],
    ).check()
    assert f"partition: {unique_topic}-0\tlow_watermark: 4" in res.stdout

    def offsets(time: str) -> str:
        return (
            run_java_tool(
                f"{TOOLS}.GetOffsetShell",
                [
                    "--bootstrap-server",
                    shared_broker.bootstrap,
                    "--topic",
                    unique_topic,
                    "--time",
                    time,
                ],
            )
            .check()
            .stdout.strip()
        )

    assert offsets("-2") == f"{unique_topic}:0:4"
    assert offsets("-1") == f"{unique_topic}:0:10"


def test_delete_records_beyond_high_watermark_is_refused(shared_broker, unique_topic, tmp_path):
    _produce(shared_broker.bootstrap, unique_topic, 3)
    spec = tmp_path / "delete.json"
    spec.write_text(
        json.dumps(
            {"version": 1, "partitions": [{"topic": unique_topic, "partition": 0, "offset": 50}]}
        )
    )
    res = run_java_tool(
        f"{TOOLS}.DeleteRecordsCommand",
        ["--bootstrap-server", shared_broker.bootstrap, "--offset-json-file", str(spec)],
    )
    assert "OffsetOutOfRangeException" in res.stdout + res.stderr


def test_cluster_tool_lists_endpoints_with_fenced_brokers(shared_broker):
    """kafka-cluster.sh list-endpoints --include-fenced-brokers (DescribeCluster v2, KIP-1073):
    the broker, unfenced."""
    res = run_java_tool(
        f"{TOOLS}.ClusterTool",
        ["list-endpoints", "--bootstrap-server", shared_broker.bootstrap,
         "--include-fenced-brokers"],
    ).check()
    header, *rows = [line.split() for line in res.stdout.splitlines() if line.strip()]
    assert header[:5] == ["ID", "HOST", "PORT", "RACK", "STATE"], res.describe()
    host, port = shared_broker.bootstrap.rsplit(":", 1)
    assert [row[:3] + row[4:5] for row in rows] == [["0", host, port, "unfenced"]], res.describe()
