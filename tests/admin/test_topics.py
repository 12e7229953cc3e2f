"""`samsa topic create|list|describe|alter-config|add-partitions|delete` against a Samsa broker,
as tables and as JSON, and Kafka's error names on failure."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.admin.conftest import Samsa, parse_table
from tests.support.broker import BrokerProcess

TOPIC_KEYS = {"name", "topic_id", "partitions", "replication_factor", "internal"}
DESCRIBE_KEYS = TOPIC_KEYS | {"configs", "partition_details"}
PARTITION_KEYS = {"partition", "leader", "replicas", "isr", "offline_replicas"}


def test_topic_lifecycle(shared_broker: BrokerProcess, unique_topic: str, samsa: Samsa) -> None:
    b, t = shared_broker.bootstrap, unique_topic
    r = samsa("topic", "create", t, "-p", "3", "-c", "retention.ms=60000", bootstrap=b)
    assert (r.rc, r.out) == (0, f"Created topic {t}.\n"), r.err

    r = samsa("topic", "create", t, bootstrap=b)
    assert r.rc == 1 and r.out == ""
    assert r.err == f"samsa: TOPIC_ALREADY_EXISTS: Topic '{t}' already exists.\n"
    r = samsa("topic", "create", t, "--if-not-exists", bootstrap=b)
    assert (r.rc, r.out) == (0, f"Topic {t} already exists.\n")

    rows = {row["TOPIC"]: row for row in samsa("topic", "list", bootstrap=b).table()}
    assert rows[t]["PARTITIONS"] == "3" and rows[t]["REPLICATION-FACTOR"] == "1"
    assert rows[t]["INTERNAL"] == "no" and len(rows[t]["ID"]) == 36
    (listed,) = [x for x in samsa("topic", "list", "--format", "json", bootstrap=b).json()
                 if x["name"] == t]
    assert set(listed) == TOPIC_KEYS
    assert (listed["partitions"], listed["replication_factor"], listed["internal"]) == (
        3, 1, False)

    (d,) = samsa("topic", "describe", t, "--format", "json", bootstrap=b).json()
    assert set(d) == DESCRIBE_KEYS and d["topic_id"] == listed["topic_id"]
    assert d["configs"] == {"retention.ms": "60000"}
    assert [p["partition"] for p in d["partition_details"]] == [0, 1, 2]
    assert all(set(p) == PARTITION_KEYS and p["replicas"] == [0] == p["isr"]
               and p["leader"] == 0 for p in d["partition_details"])

    r = samsa("topic", "alter-config", t, "--set", "cleanup.policy=compact",
              "--delete", "retention.ms", bootstrap=b)
    assert (r.rc, r.out) == (0, f"Altered the configs of topic {t}.\n"), r.err
    r = samsa("topic", "add-partitions", t, "-p", "5", bootstrap=b)
    assert (r.rc, r.out) == (0, f"Topic {t} now has 5 partitions.\n"), r.err

    r = samsa("topic", "describe", t, bootstrap=b)
    first, *table = r.out.splitlines()
    assert r.rc == 0 and first.startswith(f"Topic: {t}  TopicId: {d['topic_id']}  ")
    assert first.endswith("PartitionCount: 5  ReplicationFactor: 1  Configs: "
                          "cleanup.policy=compact")
    assert [(p["PARTITION"], p["LEADER"], p["REPLICAS"], p["ISR"], p["OFFLINE"])
            for p in parse_table(table)] == [(str(i), "0", "0", "0", "-") for i in range(5)]

    r = samsa("topic", "alter-config", t, "--set", "retention.ms=1000", "--format", "json",
              bootstrap=b)
    assert r.json() == {"name": t, "set": {"retention.ms": "1000"}, "deleted": []}
    r = samsa("topic", "add-partitions", t, "-p", "6", "--format", "json", bootstrap=b)
    assert r.json() == {"name": t, "partitions": 6}
    (d,) = samsa("topic", "describe", t, "--format", "json", bootstrap=b).json()
    assert d["partitions"] == 6 and d["configs"] == {"cleanup.policy": "compact",
                                                      "retention.ms": "1000"}

    r = samsa("topic", "delete", t, "--format", "json", bootstrap=b)
    assert r.json() == [{"name": t, "deleted": True, "topic_id": d["topic_id"]}]
    assert t not in {x["name"] for x in samsa("topic", "list", "--format", "json",
                                                bootstrap=b).json()}


def test_errors_name_kafkas_error_and_exit_non_zero(shared_broker: BrokerProcess,
                                                     unique_topic: str, samsa: Samsa) -> None:
    b, t = shared_broker.bootstrap, unique_topic
    r = samsa("topic", "describe", t, bootstrap=b)
    assert r.rc == 1
    assert r.err == f"samsa: UNKNOWN_TOPIC_OR_PARTITION: Topic '{t}' does not exist.\n"
    r = samsa("topic", "delete", t, bootstrap=b)
    assert r.rc == 1 and r.err.startswith("samsa: UNKNOWN_TOPIC_OR_PARTITION"), r.err
    r = samsa("topic", "create", t, "-p", "0", bootstrap=b)
    assert r.rc == 1 and r.err.startswith("samsa: INVALID_PARTITIONS: "), r.err
    r = samsa("topic", "create", t, "-p", "2", "--format", "json", bootstrap=b)
    assert r.json() == {"name": t, "created": True, "topic_id": r.json()["topic_id"],
                        "partitions": 2, "replication_factor": 1}
    r = samsa("topic", "add-partitions", t, "-p", "1", bootstrap=b)
    assert r.rc == 1 and r.err.startswith("samsa: INVALID_PARTITIONS: "), r.err
    r = samsa("topic", "alter-config", t, "--set", "no.such.config=1", bootstrap=b)
    assert r.rc == 1 and r.err.startswith("samsa: INVALID_CONFIG: "), r.err
    assert samsa("topic", "delete", t, bootstrap=b).out == f"Deleted topic {t}.\n"
    r = samsa("topic", "list", bootstrap=None)
    assert r.rc == 1 and "no bootstrap server" in r.err
    r = samsa("topic", "list", bootstrap="127.0.0.1:1")
    assert r.rc == 1 and r.err.startswith("samsa: NETWORK_EXCEPTION: cannot connect"), r.err


def test_list_leaves_out_internal_topics_when_asked(shared_broker: BrokerProcess,
                                                    samsa: Samsa) -> None:
    b = shared_broker.bootstrap
    # __consumer_offsets exists once a group has asked for its coordinator
    assert samsa("group", "list", bootstrap=b).rc == 0
    assert samsa("group", "describe", "any-group", bootstrap=b).rc == 1
    names = {x["name"]: x for x in samsa("topic", "list", "--format", "json", bootstrap=b).json()}
    assert names["__consumer_offsets"]["internal"] is True
    r = samsa("topic", "list", "--exclude-internal", "--format", "json", bootstrap=b)
    assert "__consumer_offsets" not in {x["name"] for x in r.json()}


def test_cluster_describe(shared_broker: BrokerProcess, samsa: Samsa) -> None:
    b = shared_broker.bootstrap
    d = samsa("cluster", "describe", "--format", "json", bootstrap=b).json()
    port = int(b.rsplit(":", 1)[1])
    assert set(d) == {"cluster_id", "controller_id", "brokers"}
    assert d["controller_id"] == 0 and len(d["cluster_id"]) == 22
    assert d["brokers"] == [{"id": 0, "host": "127.0.0.1", "port": port, "rack": None}]
    r = samsa("cluster", "describe", bootstrap=b)
    first, *rest = r.out.splitlines()
    assert first == f"Cluster: {d['cluster_id']}  Controller: 0"
    assert parse_table(rest) == [{"ID": "0", "HOST": "127.0.0.1", "PORT": str(port),
                                  "RACK": "-"}]


def test_the_samsa_script_needs_no_client_library_nor_the_broker(
        shared_broker: BrokerProcess, unique_topic: str) -> None:
    """`samsa topic create` / `list` as installed (the console script): it loads neither
    librdkafka nor the broker, the log or the coordinators."""
    probe = (
        "import sys\n"
        "from samsa.broker.cli import main\n"
        "rc = main(sys.argv[1:])\n"
        "heavy = ('confluent_kafka', 'uvloop', 'samsa.storage', 'samsa.coordinator',\n"
        "         'samsa.broker.app', 'samsa.broker.network', 'samsa.broker.handlers')\n"
        "print(sorted({m for m in sys.modules if m.startswith(heavy)}), file=sys.stderr)\n"
        "sys.exit(rc)\n")
    b = shared_broker.bootstrap
    samsa_script = Path(sys.executable).parent / "samsa"
    r = subprocess.run([str(samsa_script), "topic", "create", unique_topic, "-b", b],
                       capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stdout) == (0, f"Created topic {unique_topic}.\n"), r.stderr
    r = subprocess.run([sys.executable, "-c", probe, "topic", "list", "-b", b, "--format",
                        "json"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stderr == "[]\n", r.stderr
    assert unique_topic in {t["name"] for t in json.loads(r.stdout)}
