"""The Java client (3.9.x and 4.x) and Kafka 4.x's own command-line tools against Samsa.

Jars come from `make java-deps` (.cache/); tests/java/src/ClientSmoke.java is compiled here.
ClientSmoke runs Admin (create/describe/list/incrementalAlterConfigs/describeConfigs/
listOffsets/delete), the idempotent producer with acks=all in every codec, and a consumer
with assign()+seekToBeginning.
"""

from __future__ import annotations

import re

import pytest

from tests.support.java import JAVA_SRC, JavaResult, compile_java, jar_version, run_java_tool

from .pyclients import unique_name

pytestmark = pytest.mark.timeout(600)

TOOLS = "org.apache.kafka.tools"
SMOKE_CHECKS = [
    "create_topic",
    "describe_topic",
    "list_topics",
    "alter_configs",
    "describe_configs",
    "produce",
    "list_offsets",
    "consume",
    "delete_topic",
]


def _ok(res: JavaResult) -> JavaResult:
    assert not res.timed_out and res.returncode == 0, res.describe()
    return res


# =========================================================================== ClientSmoke
@pytest.mark.parametrize("classpath", ["clients39", "kafka4"])
def test_client_smoke(shared_broker, classpath: str):
    classes = compile_java([JAVA_SRC / "ClientSmoke.java"], classpath=classpath)
    topic = unique_name(f"java-smoke-{classpath}")
    res = run_java_tool(
        "ClientSmoke",
        [shared_broker.bootstrap, topic, "200"],
        classpath=classpath,
        extra_classpath=[classes],
        timeout=240,
    )
    version = jar_version(classpath)
    assert f"kafka-clients {version}" in res.stdout, res.describe()
    passed = re.findall(r"^CHECK (\S+) OK", res.stdout, re.M)
    failed = re.findall(r"^CHECK (\S+) FAIL (.*)$", res.stdout, re.M)
    assert not failed, f"kafka-clients {version}: {failed}\n{res.describe()}"
    assert passed == SMOKE_CHECKS, res.describe()
    _ok(res)


# =========================================================================== TopicCommand
def topic_cmd(bootstrap: str, *args: str, timeout: float = 90) -> JavaResult:
    return run_java_tool(
        f"{TOOLS}.TopicCommand", ["--bootstrap-server", bootstrap, *args], timeout=timeout
    )


def _describe_partitions(out: str, topic: str) -> list[int]:
    return [
        int(m.group(1))
        for m in re.finditer(rf"Topic:\s*{re.escape(topic)}\s+Partition:\s*(\d+)", out)
    ]


def test_topic_command_lifecycle(shared_broker):
    b = shared_broker.bootstrap
    topic = unique_name("tool-topic")

    _ok(
        topic_cmd(
            b,
            "--create",
            "--topic",
            topic,
            "--partitions",
            "2",
            "--replication-factor",
            "1",
            "--config",
            "retention.ms=3600000",
        )
    )

    listed = _ok(topic_cmd(b, "--list"))
    assert topic in listed.stdout.split(), listed.describe()

    desc = _ok(topic_cmd(b, "--describe", "--topic", topic))
    assert re.search(
        rf"Topic:\s*{re.escape(topic)}\s+TopicId:\s*\S+\s+PartitionCount:\s*2", desc.stdout
    ), desc.describe()
    assert "ReplicationFactor: 1" in desc.stdout, desc.describe()
    assert "retention.ms=3600000" in desc.stdout, desc.describe()
    assert _describe_partitions(desc.stdout, topic) == [0, 1], desc.describe()
    assert re.search(r"Partition:\s*0\s+Leader:\s*0\s+Replicas:\s*0\s+Isr:\s*0", desc.stdout), (
        desc.describe()
    )

    _ok(topic_cmd(b, "--alter", "--topic", topic, "--partitions", "4"))
    desc = _ok(topic_cmd(b, "--describe", "--topic", topic))
    assert _describe_partitions(desc.stdout, topic) == [0, 1, 2, 3], desc.describe()

    # creating it again is an error that names the topic
    again = topic_cmd(b, "--create", "--topic", topic, "--partitions", "1")
    assert again.returncode != 0, again.describe()
    assert "already exists" in (again.stdout + again.stderr), again.describe()

    _ok(topic_cmd(b, "--delete", "--topic", topic))
    listed = _ok(topic_cmd(b, "--list"))
    assert topic not in listed.stdout.split(), listed.describe()


# =========================================================================== console tools
def test_console_producer_then_console_consumer(shared_broker):
    b = shared_broker.bootstrap
    topic = unique_name("tool-console")
    _ok(topic_cmd(b, "--create", "--topic", topic, "--partitions", "1"))
    lines = [f"k{i}\tvalue number {i} ✓" for i in range(50)]
    prod = run_java_tool(
        f"{TOOLS}.ConsoleProducer",
        [
            "--bootstrap-server",
            b,
            "--topic",
            topic,
            "--request-required-acks",
            "all",
            "--compression-codec",
            "lz4",
            "--reader-property",
            "parse.key=true",
            "--reader-property",
            "key.separator=\t",
        ],
        input="\n".join(lines) + "\n",
        timeout=90,
    )
    _ok(prod)

    cons = run_java_tool(
        f"{TOOLS}.consumer.ConsoleConsumer",
        [
            "--bootstrap-server",
            b,
            "--topic",
            topic,
            "--partition",
            "0",
            "--from-beginning",
            "--max-messages",
            str(len(lines)),
            "--timeout-ms",
            "20000",
            "--formatter-property",
            "print.key=true",
            "--formatter-property",
            "key.separator=\t",
            "--formatter-property",
            "print.offset=true",
        ],
        jvm_args=["-Dfile.encoding=UTF-8", "-Dstdout.encoding=UTF-8"],
        timeout=90,
    )
    _ok(cons)
    out = [ln for ln in cons.stdout.splitlines() if ln.strip()]
    assert len(out) == len(lines), cons.describe()
    for i, (got, want) in enumerate(zip(out, lines, strict=True)):
        # print.offset puts "Offset:N" first, tab-separated
        assert got == f"Offset:{i}\t{want}", f"line {i}: {got!r} != {want!r}"
    assert f"Processed a total of {len(lines)} messages" in cons.stderr, cons.describe()


def test_console_consumer_with_group(shared_broker):
    b = shared_broker.bootstrap
    topic = unique_name("tool-console-group")
    _ok(topic_cmd(b, "--create", "--topic", topic, "--partitions", "2"))
    _ok(
        run_java_tool(
            f"{TOOLS}.ConsoleProducer",
            ["--bootstrap-server", b, "--topic", topic],
            input="".join(f"m{i}\n" for i in range(20)),
            timeout=90,
        )
    )
    cons = run_java_tool(
        f"{TOOLS}.consumer.ConsoleConsumer",
        [
            "--bootstrap-server",
            b,
            "--topic",
            topic,
            "--group",
            unique_name("g"),
            "--from-beginning",
            "--max-messages",
            "20",
            "--timeout-ms",
            "20000",
        ],
        timeout=90,
    )
    _ok(cons)
    assert sorted(cons.stdout.split()) == sorted(f"m{i}" for i in range(20))


# =========================================================================== perf tools
PERF_RECORDS = 20000


def test_producer_performance_and_get_offset_shell(shared_broker):
    b = shared_broker.bootstrap
    topic = unique_name("tool-perf")
    _ok(topic_cmd(b, "--create", "--topic", topic, "--partitions", "3"))
    perf = _ok(
        run_java_tool(
            f"{TOOLS}.ProducerPerformance",
            [
                "--topic",
                topic,
                "--num-records",
                str(PERF_RECORDS),
                "--record-size",
                "100",
                "--throughput",
                "-1",
                "--producer-props",
                f"bootstrap.servers={b}",
                "acks=all",
                "linger.ms=5",
            ],
            timeout=240,
        )
    )
    # final line: "20000 records sent, 12345.6 records/sec (1.18 MB/sec), 12.3 ms avg latency..."
    m = re.search(
        r"^(\d+) records sent, ([\d.]+) records/sec .*?([\d.]+) ms avg latency", perf.stdout, re.M
    )
    assert m and int(m.group(1)) == PERF_RECORDS, perf.describe()
    print(f"ProducerPerformance: {m.group(0)}")

    shell = _ok(
        run_java_tool(
            f"{TOOLS}.GetOffsetShell",
            ["--bootstrap-server", b, "--topic", topic, "--time", "-1"],
            timeout=90,
        )
    )
    ends = dict(
        (int(p), int(o))
        for p, o in re.findall(rf"^{re.escape(topic)}:(\d+):(\d+)$", shell.stdout, re.M)
    )
    assert sorted(ends) == [0, 1, 2], shell.describe()
    assert sum(ends.values()) == PERF_RECORDS, shell.describe()

    early = _ok(
        run_java_tool(
            f"{TOOLS}.GetOffsetShell",
            ["--bootstrap-server", b, "--topic-partitions", f"{topic}:0,{topic}:2", "--time", "-2"],
            timeout=90,
        )
    )
    assert sorted(re.findall(rf"^{re.escape(topic)}:(\d+):(\d+)$", early.stdout, re.M)) == [
        ("0", "0"),
        ("2", "0"),
    ], early.describe()


def test_consumer_performance(shared_broker):
    b = shared_broker.bootstrap
    topic = unique_name("tool-consperf")
    _ok(topic_cmd(b, "--create", "--topic", topic, "--partitions", "2"))
    _ok(
        run_java_tool(
            f"{TOOLS}.ProducerPerformance",
            [
                "--topic",
                topic,
                "--num-records",
                str(PERF_RECORDS),
                "--record-size",
                "100",
                "--throughput",
                "-1",
                "--producer-props",
                f"bootstrap.servers={b}",
            ],
            timeout=240,
        )
    )
    perf = _ok(
        run_java_tool(
            f"{TOOLS}.ConsumerPerformance",
            [
                "--bootstrap-server",
                b,
                "--topic",
                topic,
                "--num-records",
                str(PERF_RECORDS),
                "--timeout",
                "20000",
                "--hide-header",
            ],
            timeout=240,
        )
    )
    # CSV: start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec,...
    row = [ln for ln in perf.stdout.splitlines() if ln.count(",") >= 5][-1].split(",")
    assert int(row[4].strip()) == PERF_RECORDS, perf.describe()


# =========================================================================== cross-language
def test_java_consumer_reads_batches_from_python_clients(shared_broker):
    """ConsoleConsumer (kafka-clients 4.x) decodes what the Python clients wrote, every codec."""
    from .pyclients import CLIENTS, CODECS, Rec, create_topic, produce

    b = shared_broker.bootstrap
    topic = unique_name("java-reads-python")
    create_topic("kafka-python", b, topic, 1)
    expected = []
    for client in CLIENTS:
        for codec in CODECS:
            recs = [
                Rec(
                    f"{client}-{codec}-k{i}".encode(),
                    f"{client} {codec} value {i} ".encode() * 5,
                    (("client", client.encode()), ("codec", codec.encode())),
                    0,
                )
                for i in range(4)
            ]
            recs = [
                Rec(r.key, r.value, r.headers, 1_700_000_000_000 + i) for i, r in enumerate(recs)
            ]
            produce(client, b, topic, codec, recs)
            expected += [
                f"client:{client},codec:{codec}\t{r.key.decode()}\t{r.value.decode()}" for r in recs
            ]
    cons = run_java_tool(
        f"{TOOLS}.consumer.ConsoleConsumer",
        [
            "--bootstrap-server",
            b,
            "--topic",
            topic,
            "--partition",
            "0",
            "--from-beginning",
            "--max-messages",
            str(len(expected)),
            "--timeout-ms",
            "20000",
            "--formatter-property",
            "print.headers=true",
            "--formatter-property",
            "print.key=true",
        ],
        timeout=90,
    )
    _ok(cons)
    got = [ln for ln in cons.stdout.splitlines() if ln.strip()]
    assert got == expected, cons.describe()
