"""Samsa side by side with Apache Kafka 4.x on this machine (the `make bench` entry point).

Fetches a Kafka broker from Maven Central (bench/pom.xml, cached in .cache/bench/), then for
each run starts Kafka, benchmarks it, stops it, and does the same for Samsa, with the same load
generators: Kafka's ProducerPerformance / ConsumerPerformance and librdkafka (confluent-kafka).
Besides produce/consume throughput: transactional produce (100 ms and one-record
transactions), produce→consume latency at a fixed rate, 8 producers + 8 consumers on 64
partitions (--many-clients), read_committed consumption of transactional data (--rc-records),
8 librdkafka producers paced at a fraction of capacity over 100-2,000 partitions and consumers
of many partitions at a low rate (--paced-*, bench/many_partitions.py), recovery after
kill -9 with --recovery-mib of log, scale to --partitions, and on a broker of their own with
an SSL listener 1 KiB records over TLS (--tls-records), lz4 JSON-like records (--lz4-records)
and parallel 10-record transactions (--txn-producers; bench/tls_lz4_txn.py) (see
docs/performance/methodology.md).
Samsa runs as one process (`samsa serve`) and, for each N > 1 of --processes (default 1,2),
as a node of N processes (`samsa serve --processes N`: column "samsa xN"), every phase the
same against each. Prints one table of medians (each Samsa column, Kafka, each Samsa column
over Kafka) and writes it to docs/performance.md.
No assertions on speed anywhere: this measures, it does not judge.

    .venv/bin/python bench/run.py            # full run, ~85 min on 2 cores, updates the docs
    .venv/bin/python bench/run.py --quick    # smoke run: few records, 1 run, docs untouched
    .venv/bin/python bench/run.py --only samsa --runs 1
    .venv/bin/python bench/run.py --processes 1   # no node column: ~60 min
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import gc
import hashlib
import importlib.metadata
import json
import mmap
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka import libversion as rdkafka_libversion
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec
from plot import ratio_svg

REPO = Path(__file__).resolve().parents[1]
CACHE_ROOT = Path(os.environ.get("SAMSA_CACHE_DIR", REPO / ".cache"))  # as tests/support/java.py
CACHE = CACHE_ROOT / "bench"
KAFKA_DIR = CACHE / "kafka-broker"
POM = REPO / "bench" / "pom.xml"
TESTS_TOOLS_LIB = CACHE_ROOT / "kafka-tools-4" / "lib"  # `make java-deps` fallback
DOC = REPO / "docs" / "performance.md"
PLOT = REPO / "docs" / "performance.svg"
RESULTS_START = "<!-- bench:results:start (written by bench/run.py; edits here are lost) -->"
RESULTS_END = "<!-- bench:results:end -->"
MIB = 1024 * 1024  # Kafka's perf tools print "MB" meaning MiB; we follow them.

# The JVM flags of Kafka's own kafka-server-start.sh / kafka-run-class.sh.
KAFKA_JVM = [
    "-Xms1g", "-Xmx1g", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true", "-Djava.net.preferIPv4Stack=true",
]  # fmt: skip
TOOL_JVM = ["-Xmx1g", "-Djava.net.preferIPv4Stack=true",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"]  # fmt: skip
LOG4J2 = """status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.target = {target}
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = {level}
rootLogger.appenderRef.out.ref = OUT
"""

# Process groups still alive; killed on any exit path (see cleanup()).
LIVE_GROUPS: set[int] = set()


# ------------------------------------------------------------------ processes


def spawn(cmd: list[str], log: Path, cwd: Path | None = None) -> subprocess.Popen[bytes]:
    """Start cmd in its own process group (so it and its children can be killed together)."""
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            cwd=cwd, start_new_session=True,
        )  # fmt: skip
    LIVE_GROUPS.add(proc.pid)
    return proc


def stop(proc: subprocess.Popen[bytes], grace: float = 30) -> bool:
    """SIGTERM the process group (a clean shutdown), SIGKILL it if that takes too long.
    True if it exited within `grace` seconds of the SIGTERM."""
    clean = False
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10)):
        if sig == signal.SIGKILL:
            kill_tree(proc.pid)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(wait)
            clean = sig == signal.SIGTERM
            break
        except subprocess.TimeoutExpired:
            continue
    LIVE_GROUPS.discard(proc.pid)
    return clean


def cleanup() -> None:
    for pgid in list(LIVE_GROUPS):
        kill_tree(pgid)
        LIVE_GROUPS.discard(pgid)


def kill_tree(pgid: int) -> None:
    """SIGKILL the group and every process under it: a node's supervisor starts each broker
    process in a session of its own, which killpg on the supervisor's group does not reach
    (and its PR_SET_PDEATHSIG would give them SIGTERM, a clean shutdown, not a kill -9):
    they go first, the group's leader last."""
    for pid in sorted(group_pids(pgid), key=lambda pid: pid == pgid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def run_tool(cmd: list[str], timeout: float,
             jit: list[tuple[float, float]] | None = None) -> tuple[int, str]:
    """Run a load generator to completion; returns (exit code, stdout+stderr). -9 = timed out.
    `jit`, if given, gets (monotonic time, CPU seconds of the tool's JIT compiler threads so
    far) every JIT_SAMPLE_S while it runs."""
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        text=True, start_new_session=True,
    )  # fmt: skip
    LIVE_GROUPS.add(proc.pid)
    done = threading.Event()
    sampler = None
    if jit is not None:
        sampler = threading.Thread(target=_sample_jit, args=(proc.pid, jit, done), daemon=True)
        sampler.start()
    try:
        out, _ = proc.communicate(timeout=timeout)
        return proc.returncode, out
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return -9, out + f"\n[killed after {timeout:.0f} s]"
    finally:
        done.set()
        if sampler is not None:
            sampler.join()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        LIVE_GROUPS.discard(proc.pid)


JIT_SAMPLE_S = 0.25
_JIT_THREADS = ("C1 CompilerThre", "C2 CompilerThre")  # HotSpot's names, cut to 15 bytes


def jit_cpu_seconds(pid: int) -> dict[str, float] | None:
    """CPU seconds of each of a JVM's JIT compiler threads so far; None once it is gone."""
    found, ticks = {}, os.sysconf("SC_CLK_TCK")
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for tid in tids:
        with contextlib.suppress(OSError, ValueError):
            name, fields = _read_stat(Path(f"/proc/{pid}/task/{tid}/stat"))
            if name.startswith(_JIT_THREADS):
                found[tid] = (int(fields[11]) + int(fields[12])) / ticks  # utime, stime
    return found


def _sample_jit(pid: int, samples: list[tuple[float, float]], done: threading.Event) -> None:
    seen: dict[str, float] = {}  # a thread that has ended keeps its last figure
    while not done.wait(JIT_SAMPLE_S):
        now = jit_cpu_seconds(pid)
        if now is None:
            return
        seen.update(now)
        samples.append((time.monotonic(), sum(seen.values())))


def jit_cores_over_tail(samples: list[tuple[float, float]], seconds: float) -> float | None:
    """The JIT compiler's CPU over the run's last `seconds`, in cores (the measured records
    come last in a run with --warmup-records). None if the samples do not reach that far."""
    if not samples or seconds <= 0:
        return None
    end_t, end_cpu = samples[-1]
    start = [s for s in samples if s[0] <= end_t - seconds]
    if not start:
        return None
    t0, cpu0 = start[-1]
    return (end_cpu - cpu0) / (end_t - t0)  # end_t - t0 >= seconds > 0


def group_pids(pgid: int) -> list[int]:
    """The processes of group `pgid` and every process under them, whatever its group: a
    node's broker processes (`samsa serve --processes N`) each run in a session of their
    own under the supervisor, and their CPU, memory and files are the node's."""
    parents: dict[int, int] = {}
    members = set()
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                f = _stat_fields(int(d.name))  # [1] ppid, [2] pgrp
                parents[int(d.name)] = int(f[1])
                if f[2] == str(pgid):
                    members.add(int(d.name))
    grown = True
    while grown:
        below = {pid for pid, ppid in parents.items() if ppid in members} - members
        members |= below
        grown = bool(below)
    return sorted(members)


def _stat_fields(pid: int) -> list[str]:
    return _read_stat(Path(f"/proc/{pid}/stat"))[1]


def _read_stat(path: Path) -> tuple[str, list[str]]:
    """A /proc stat file: (comm, the fields after "(comm)"). comm may itself contain spaces
    and parentheses; [0] of the fields is state (field 3)."""
    text = path.read_text()
    return text[text.index("(") + 1 : text.rindex(")")], text[text.rindex(")") + 2 :].split()


def cpu_seconds(pgid: int) -> float:
    """utime+stime of every live process in the group (the broker and any workers)."""
    ticks = 0
    for pid in group_pids(pgid):
        with contextlib.suppress(OSError, IndexError):
            f = _stat_fields(pid)
            ticks += int(f[11]) + int(f[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def status_mib(pgid: int, field: str) -> float:
    """A /proc/<pid>/status memory field (kB) summed over the process group, in MiB."""
    total_kib = 0
    for pid in group_pids(pgid):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith(f"{field}:"):
                    total_kib += int(line.split()[1])
    return total_kib / 1024


def peak_rss_mib(pgid: int) -> float:
    return status_mib(pgid, "VmHWM")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_base(count: int) -> int:
    """A port P with P..P+count-1 all free now (a node of `count` processes listens on them)."""
    while True:
        base = free_port()
        if base + count < 65000 and all(_port_free(base + i) for i in range(count)):
            return base


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def machine_cpu_seconds() -> dict[str, float]:
    """The machine's CPU seconds since boot by kind (/proc/stat): `busy` (not idle: user,
    system, interrupts and steal), `irq` (hard and soft interrupts: the kernel's networking,
    counted to no process) and `steal` (time the hypervisor gave the virtual CPUs to others)."""
    f = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = f
    tick = os.sysconf("SC_CLK_TCK")
    return {"busy": (user + nice + system + irq + softirq + steal) / tick,
            "irq": (irq + softirq) / tick, "steal": steal / tick}


def process_ticks() -> dict[int, tuple[str, int]]:
    """utime+stime in clock ticks of every process on the machine, kernel threads included:
    {pid: (name with digits as N, ticks)}."""
    out = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                comm, f = _read_stat(d / "stat")
                out[int(d.name)] = (re.sub(r"\d+", "N", comm), int(f[11]) + int(f[12]))
    return out


def busiest_others(before: dict[int, tuple[str, int]], after: dict[int, tuple[str, int]],
                   exclude: set[int], n: int = 3) -> list[tuple[str, float]]:  # fmt: skip
    """The `n` process names that used the most CPU seconds between two process_ticks(),
    leaving out `exclude` (only processes alive at both are seen)."""
    used: dict[str, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for pid, (name, ticks) in after.items():
        if pid in before and pid not in exclude and ticks > before[pid][1]:
            used[name] = used.get(name, 0.0) + (ticks - before[pid][1]) / tick
    return sorted(used.items(), key=lambda kv: -kv[1])[:n]


def machine_busy_seconds() -> float:
    """CPU seconds all cores spent not idle since boot (/proc/stat), to spot other load."""
    return machine_cpu_seconds()["busy"]


def own_seconds() -> float:
    """CPU of this process and of its waited-for children (the load-generator tools)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def wait_for_quiet(max_wait: float, threshold: float = 0.25) -> float:
    """Wait (up to max_wait s) until other processes use < threshold of the machine's CPU.

    Other work on a 2-core box (a test suite, a build) skews a benchmark more than anything
    the brokers do; returns the busy share seen last, which the report prints.
    """
    deadline = time.monotonic() + max_wait
    while True:
        b0 = machine_busy_seconds()
        time.sleep(2)
        share = (machine_busy_seconds() - b0) / (2 * (os.cpu_count() or 1))
        if share < threshold or time.monotonic() >= deadline:
            return share
        print(f"  machine busy ({share:.0%} CPU used by other processes), waiting ...", flush=True)


def touch_free_memory(reserve_mib: int = 2048) -> float:
    """Fault in the machine's free memory once, then give it back; prints and returns the GiB
    touched.

    On a virtual machine whose memory the host backs lazily (Firecracker, as here), the first
    write into each guest page costs about twice a later one: 6.9 against 3.4 us per 4 KiB
    page measured here, and a 16,600 B write() into new page cache 22.7 against 8.4 us of
    system time. A broker's log grows into such pages, so without this its CPU per GB
    measures the VM's history as much as the broker (the same tree ran 6.8 s/GB one night and
    8-9 s/GB the next morning). Once every free page has been written, the pages the brokers'
    logs and heaps get have been too, for both brokers alike. MAP_POPULATE makes the kernel
    fault the pages in; every chunk stays mapped until all are, so each is a different page.
    """
    meminfo = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
    available_mib = int(meminfo["MemAvailable"].split()[0]) // 1024
    chunks, chunk_mib = [], 256
    want_mib = max(0, available_mib - max(reserve_mib, available_mib // 8))
    flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | getattr(mmap, "MAP_POPULATE", 0)
    t0 = time.monotonic()
    try:
        for _ in range(want_mib // chunk_mib):
            chunks.append(mmap.mmap(-1, chunk_mib * MIB, flags=flags))
    except OSError:  # refused (overcommit limits): what was touched still counts
        pass
    finally:
        touched = len(chunks) * chunk_mib / 1024
        for chunk in chunks:
            chunk.close()
    print(f"faulted in {touched:.1f} GiB of free memory in {time.monotonic() - t0:.1f} s",
          flush=True)
    return touched


# ------------------------------------------------------------------ readiness


def api_versions_answered(port: int) -> bool:
    """Send ApiVersions v0 and read the whole answer: the cheapest request every broker serves."""
    client_id = b"bench"
    body = struct.pack(">hhih", 18, 0, 7, len(client_id)) + client_id
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.sendall(struct.pack(">i", len(body)) + body)
            size = struct.unpack(">i", _recv_exact(s, 4))[0]
            return struct.unpack(">i", _recv_exact(s, size)[:4])[0] == 7
    except (OSError, struct.error):
        return False


def _recv_exact(s: socket.socket, n: int) -> bytes:
    buf = bytearray()  # (a Metadata answer of thousands of partitions comes in many chunks)
    while len(buf) < n:
        chunk = s.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise OSError("connection closed")
        buf += chunk
    return bytes(buf)


def wait_first_answer(proc: subprocess.Popen[bytes], port: int, t0: float, log: Path,
                      processes: int = 1) -> float:
    """Seconds from process start to the first answered ApiVersions request; for a node of
    several processes, to each process (ports port..port+processes-1) having answered one."""
    deadline = t0 + 180  # a hang guard, not a measurement limit
    pending = list(range(port, port + processes))
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"exited with {proc.returncode} during start-up; see {log}")
        pending = [p for p in pending if not api_versions_answered(p)]
        if not pending:
            return time.monotonic() - t0
        time.sleep(0.02)
    raise RuntimeError(f"no answer on port(s) {pending} after 180 s; see {log}")


# ------------------------------------------------------------------ Kafka from Maven Central


def _pom_digest() -> str:
    return hashlib.sha256(POM.read_bytes()).hexdigest()[:16]


def ensure_kafka_lib() -> tuple[Path | None, str]:
    """(lib dir, "") or (None, why not). Copies into a temp dir, renamed only on success."""
    lib, stamp = KAFKA_DIR / "lib", KAFKA_DIR / ".stamp"
    if stamp.exists() and stamp.read_text().strip() == _pom_digest():
        return lib, ""
    mvn = shutil.which(os.environ.get("MVN", "mvn"))  # MVN: as in the Makefile
    if mvn is None:
        return None, "mvn not found (apt-get install maven)"
    tmp = KAFKA_DIR.with_name("kafka-broker.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"fetching the Kafka broker from Maven Central into {KAFKA_DIR} ...", flush=True)
    rc, out = run_tool(
        [mvn, "-B", "-q", "-Dstyle.color=never", "-f", str(POM),
         "dependency:copy-dependencies", f"-DoutputDirectory={tmp / 'lib'}"],
        timeout=900,
    )  # fmt: skip
    if rc != 0 or not any((tmp / "lib").glob("kafka_2.13-*.jar")):
        last = " | ".join(out.strip().splitlines()[-3:]) or "no output"
        return None, f"mvn dependency:copy-dependencies failed (exit {rc}): {last}"
    shutil.rmtree(KAFKA_DIR, ignore_errors=True)
    tmp.rename(KAFKA_DIR)
    stamp.write_text(_pom_digest() + "\n")
    return lib, ""


def jar_version(lib: Path, artifact: str) -> str:
    for jar in lib.glob(f"{artifact}-*.jar"):
        return jar.name[len(artifact) + 1 : -len(".jar")]
    return "?"


def kafka_properties(work: Path, port: int, cport: int) -> str:
    return f"""process.roles=broker,controller
node.id=1
listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{cport}
advertised.listeners=PLAINTEXT://127.0.0.1:{port}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
controller.quorum.bootstrap.servers=127.0.0.1:{cport}
log.dirs={work / "kafka-logs"}
num.partitions=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
# ConsumerPerformance joins a group: don't wait 3 s for more members.
group.initial.rebalance.delay.ms=0
# log.flush.interval.* left at Kafka's default (Long.MAX: the OS flushes), as in Samsa.
"""


def format_kafka_storage(lib: Path, work: Path, props: Path) -> None:
    java = ["java", f"-Dlog4j2.configurationFile={work / 'log4j2-tools.properties'}",
            "-cp", f"{lib}/*", "kafka.tools.StorageTool"]  # fmt: skip
    rc, out = run_tool([*java, "random-uuid"], timeout=120)
    if rc != 0:
        raise RuntimeError(f"StorageTool random-uuid failed: {out[-2000:]}")
    cluster_id = out.strip().splitlines()[-1]
    # --standalone: this node alone is the KRaft controller quorum (kafka-storage.sh format).
    rc, out = run_tool([*java, "format", "-t", cluster_id, "-c", str(props), "--standalone"], 120)
    if rc != 0:
        raise RuntimeError(f"StorageTool format failed: {out[-2000:]}")


# ------------------------------------------------------------------ brokers


@dataclass
class Broker:
    name: str
    proc: subprocess.Popen[bytes]
    port: int
    startup_s: float
    log: Path
    cmd: list[str]  # the same command restarts it on the same data (recovery phase)
    processes: int = 1  # a Samsa node's broker processes, on ports port..port+processes-1

    @property
    def bootstrap(self) -> str:
        """The first port alone, also for a node: clients find its other brokers through
        Metadata, as they would a cluster's."""
        return f"127.0.0.1:{self.port}"

    def restart(self) -> float:
        """Start the same command on the same data; seconds to every process answering."""
        t0 = time.monotonic()
        self.proc = spawn(self.cmd, self.log)  # `running` stops this one at the end
        return wait_first_answer(self.proc, self.port, t0, self.log, self.processes)

    def kill9(self) -> None:
        """kill -9 of the broker, or of every process of a node at once."""
        kill_tree(self.proc.pid)
        self.proc.wait(30)
        LIVE_GROUPS.discard(self.proc.pid)


SAMSA_NODE = re.compile(r"samsa x(\d+)")


def samsa_column(processes: int) -> str:
    """The bench's name of a Samsa broker of `processes` processes (its column)."""
    return "samsa" if processes == 1 else f"samsa x{processes}"


def samsa_processes(name: str) -> int:
    """The processes of the Samsa column `name` ("samsa x2": a node of 2; anything else 1)."""
    m = SAMSA_NODE.fullmatch(name)
    return int(m.group(1)) if m else 1


def write_log4j_configs(work: Path) -> None:
    (work / "log4j2-broker.properties").write_text(LOG4J2.format(target="SYSTEM_OUT", level="info"))
    (work / "log4j2-tools.properties").write_text(LOG4J2.format(target="SYSTEM_ERR", level="warn"))


def start_kafka(lib: Path, work: Path, settings: tuple[str, ...] = (),
                port: int | None = None) -> Broker:
    """`settings`: K=V lines added to the bench's server.properties (the A/B scripts); `port`:
    the PLAINTEXT listener's (a free one if None)."""
    port, cport = port or free_port(), free_port()
    props = work / "server.properties"
    props.write_text(kafka_properties(work, port, cport) + "".join(f"{s}\n" for s in settings))
    format_kafka_storage(lib, work, props)
    log = work / "kafka.log"
    cmd = ["java", *KAFKA_JVM, f"-Dlog4j2.configurationFile={work / 'log4j2-broker.properties'}",
           "-cp", f"{lib}/*", "kafka.Kafka", str(props)]  # fmt: skip
    t0 = time.monotonic()
    proc = spawn(cmd, log)
    return Broker("kafka", proc, port, wait_first_answer(proc, port, t0, log), log, cmd)


def start_samsa(work: Path, settings: tuple[str, ...] = (), port: int | None = None,
                processes: int = 1) -> Broker:
    """`settings`: K=V broker properties (`samsa serve --set`), `port` as start_kafka's (the
    first of a node's). `processes` > 1: a node of that many (`samsa serve --processes N`,
    broker ids 0..N-1 on ports port..port+N-1, no ZooKeeper: they share the node's metadata
    file), timed to every process answering."""
    port = port or free_base(processes)
    log = work / "samsa.log"
    samsa = Path(sys.executable).parent / "samsa"
    node = ["--processes", str(processes), "--broker-id", "0"] if processes > 1 else []
    cmd = [str(samsa), "serve", *node, "--listen", f"127.0.0.1:{port}",
           "--data-dir", str(work / "data"), *(arg for s in settings for arg in ("--set", s))]
    t0 = time.monotonic()
    proc = spawn(cmd, log)
    startup = wait_first_answer(proc, port, t0, log, processes)
    return Broker(samsa_column(processes), proc, port, startup, log, cmd, processes)


@contextlib.contextmanager
def running(name: str, kafka_lib: Path | None, settings: tuple[str, ...] = (),
            port: int | None = None) -> Iterator[Broker]:
    stem = name.replace(" ", "-")
    work = Path(tempfile.mkdtemp(prefix=f"samsa-bench-{stem}-"))
    broker = None
    try:
        write_log4j_configs(work)
        broker = (start_kafka(kafka_lib, work, settings, port) if kafka_lib
                  else start_samsa(work, settings, port, samsa_processes(name)))
        yield broker
    finally:
        if broker is not None:
            stop(broker.proc)
            keep = CACHE / f"last-{stem}.log"  # the broker log survives the temp dir
            with contextlib.suppress(OSError):
                shutil.copyfile(broker.log, keep)
        shutil.rmtree(work, ignore_errors=True)


def create_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(60)
    # Wait until every partition has a leader: Kafka answers create before metadata
    # propagates.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        md = admin.list_topics(topic, timeout=10).topics.get(topic)
        if (md is not None and md.error is None and len(md.partitions) == partitions
                and all(p.leader >= 0 for p in md.partitions.values())):
            return
        time.sleep(0.1)
    raise RuntimeError(f"topic {topic} has partitions without a leader after 60 s")


# ------------------------------------------------------------------ load generators


@dataclass
class Outcome:
    """One load-generator run: figures on success, or the command and output on failure."""

    figures: dict[str, float] = field(default_factory=dict)
    error: str = ""
    command: str = ""


PRODUCER_RE = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th"
)
# With --warmup-records (KIP-1052) ProducerPerformance adds the same figures for the records
# after the warm-up.
PRODUCER_STEADY_RE = re.compile(
    PRODUCER_RE.pattern.replace(" records sent", " steady state records sent"))


def java_cmd(tools_lib: Path, main: str, args: list[str]) -> list[str]:
    log4j = f"-Dlog4j2.configurationFile={CACHE / 'log4j2-tools.properties'}"
    return ["java", *TOOL_JVM, log4j, "-cp", f"{tools_lib}/*", main, *args]


def java_produce(tools: Path, bootstrap: str, topic: str, n: int, size: int, acks: str,
                 extra: tuple[str, ...] = (), warmup: int = 0) -> Outcome:  # fmt: skip
    """ProducerPerformance: `warmup` records, then the `n` its figures are of."""
    args = ["--bootstrap-server", bootstrap, "--topic", topic, "--num-records", str(n + warmup),
            "--record-size", str(size), "--throughput", "-1", "--command-property", f"acks={acks}",
            *extra]
    if warmup:
        args += ["--warmup-records", str(warmup)]
    cmd = java_cmd(tools, "org.apache.kafka.tools.ProducerPerformance", args)  # fmt: skip
    jit: list[tuple[float, float]] = []
    rc, out = run_tool(cmd, timeout=900, jit=jit)
    matches = (PRODUCER_STEADY_RE if warmup else PRODUCER_RE).findall(out)
    if rc != 0 or not matches or int(matches[-1][0]) != n:
        return Outcome(error=f"exit {rc}\n{_tail(out)}", command=_shown(cmd))
    sent, rps, mbps, avg, _max, p50, _p95, p99 = matches[-1]
    figures = {"rps": float(rps), "mbps": float(mbps), "avg_ms": float(avg),
               "p50_ms": float(p50), "p99_ms": float(p99)}  # fmt: skip
    # Whether the tool was still compiling while its figures were taken (the warm-up's job).
    rate = figures["rps"]
    jit_cores = jit_cores_over_tail(jit, n / rate) if rate > 0 else None
    if jit_cores is not None:
        figures["tool_jit_cores"] = jit_cores
    return Outcome(figures)


def java_consume(tools: Path, bootstrap: str, topic: str, n: int,
                 extra: tuple[str, ...] = ()) -> Outcome:  # fmt: skip
    args = ["--bootstrap-server", bootstrap, "--topic", topic, "--num-records", str(n),
            "--timeout", "60000", "--group", f"bench-{topic}", *extra]  # fmt: skip
    cmd = java_cmd(tools, "org.apache.kafka.tools.ConsumerPerformance", args)
    rc, out = run_tool(cmd, timeout=900)
    row = _consumer_row(out)
    if rc != 0 or row is None or int(float(row[4])) < n:
        return Outcome(error=f"exit {rc}\n{_tail(out)}", command=_shown(cmd))
    # fetch.* columns: the steady fetch rate, without the group join (rebalance.time.ms).
    return Outcome({"rps": float(row[9]), "mbps": float(row[8])})


def _consumer_row(out: str) -> list[str] | None:
    lines = out.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("start.time") and i + 1 < len(lines):
            row = [c.strip() for c in lines[i + 1].split(",")]
            return row if len(row) >= 10 else None
    return None


def rdkafka_produce(bootstrap: str, topic: str, n: int, size: int, acks: str) -> Outcome:
    conf = {"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5,
            "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000,
            "enable.idempotence": False}  # fmt: skip
    failed: list[str] = []

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None and len(failed) < 5:
            failed.append(str(err))

    p = Producer(conf)
    payload = os.urandom(size)
    t0 = time.perf_counter()
    for _ in range(n):
        while True:
            try:
                p.produce(topic, payload, on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.01)
    left = p.flush(600)
    elapsed = time.perf_counter() - t0
    shown = f"confluent_kafka.Producer({conf}) x{n} records of {size} B to {topic}"
    if left or failed:
        return Outcome(error=f"{left} undelivered; errors: {failed}", command=shown)
    return Outcome({"rps": n / elapsed, "mbps": n * size / elapsed / MIB})


# librdkafka consumers of the bench (here and bench/load_worker.py): see rdkafka_consume.
RDKAFKA_FETCH_QUEUE_BACKOFF_MS = 10
# A librdkafka consumer phase reads its partition this many times over, each pass with a new
# consumer: one pass of 400,000 × 1 KiB takes about a third of a second, too short to time
# once or to charge CPU to (/proc counts it in 10 ms ticks). Not one consumer seeking back: at
# the partition's end it waits in a long-poll Fetch (fetch.wait.max.ms) before the seek counts.
RDKAFKA_CONSUME_PASSES = 5


def rdkafka_consume(bootstrap: str, topic: str, n: int, size: int,
                    extra: dict[str, object] | None = None, passes: int = 1) -> Outcome:
    """Read partition 0 of `topic` (`n` records) from its start, `passes` times; the rate is
    over the passes' summed time."""
    elapsed = 0.0
    for _ in range(passes):
        out = _rdkafka_consume_once(bootstrap, topic, n, extra)
        if out.error:
            return out
        elapsed += out.figures["seconds"]
    total = n * passes
    return Outcome({"rps": total / elapsed, "mbps": total * size / elapsed / MIB})


def _rdkafka_consume_once(bootstrap: str, topic: str, n: int,
                          extra: dict[str, object] | None) -> Outcome:  # fmt: skip
    # assign() without subscribe(): no group protocol, the plain fetch path.
    # fetch.queue.backoff.ms: librdkafka stops fetching for this long (default 1,000 ms) once
    # its local queue holds queued.min.messages or 64 MiB; the Python loop drains that queue in
    # tens of ms, so at the default a phase measures how many 1 s pauses the client took (more
    # for a broker that answers faster), not the broker. Same setting for both brokers.
    conf = {"bootstrap.servers": bootstrap, "group.id": f"bench-rdk-{topic}",
            "enable.auto.commit": False, "fetch.max.bytes": 52_428_800,
            "fetch.queue.backoff.ms": RDKAFKA_FETCH_QUEUE_BACKOFF_MS,
            **(extra or {})}  # fmt: skip
    shown = f"confluent_kafka.Consumer({conf}).assign([{topic}/0@0]) x{n}"
    c = Consumer(conf)
    seen, errors = 0, list[str]()
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        t0 = time.perf_counter()
        while seen < n and time.perf_counter() - t0 < 600:  # hang guard
            for m in c.consume(10_000, timeout=1):
                if m.error() is None:
                    seen += 1
                elif len(errors) < 5:
                    errors.append(str(m.error()))
        elapsed = time.perf_counter() - t0
    except KafkaException as e:
        return Outcome(error=str(e), command=shown)
    finally:
        c.close()
    if seen < n:
        return Outcome(error=f"consumed {seen}/{n}; errors: {errors}", command=shown)
    return Outcome({"seconds": elapsed})


def rdkafka_txn_rate(bootstrap: str, topic: str, seconds: float) -> Outcome:
    """One-record transactions back to back (begin, produce 100 B, commit) for `seconds`."""
    conf = {"bootstrap.servers": bootstrap, "transactional.id": f"bench-1rec-{topic}",
            "linger.ms": 0}  # fmt: skip
    shown = (f"confluent_kafka.Producer({conf}): init_transactions, then begin/produce/commit "
             f"for {seconds:.0f} s to {topic}")
    payload = os.urandom(100)
    n = 0
    try:
        p = Producer(conf)
        p.init_transactions(60)
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            p.begin_transaction()
            p.produce(topic, payload)
            p.commit_transaction(60)
            n += 1
        elapsed = time.perf_counter() - t0
    except KafkaException as e:
        return Outcome(error=f"after {n} transactions: {e}", command=shown)
    return Outcome({"tps": n / elapsed, "count": float(n)})


def rdkafka_latency(bootstrap: str, topic: str, rate: int, seconds: float, size: int) -> Outcome:
    """Produce at a fixed rate (acks=all, no linger) while a consumer tails the partition.

    Each value carries its monotonic send time; latency = receive time - send time, all in
    this process. The consumer uses assign() (plain fetch long-poll, no group protocol).
    """
    n = int(rate * seconds)
    shown = (f"confluent_kafka Producer(acks=all, linger.ms=0) at {rate} rec/s x {n} records "
             f"of {size} B + Consumer.assign([{topic}/0@0]) in a thread")
    lat_ns: list[int] = []
    errors: list[str] = []
    stop_at = [float("inf")]

    def consume() -> None:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-lat-{topic}",
                      "enable.auto.commit": False})  # fmt: skip
        try:
            c.assign([TopicPartition(topic, 0, 0)])
            while len(lat_ns) < n and time.monotonic() < stop_at[0]:
                m = c.poll(0.2)
                if m is None:
                    continue
                if m.error() is not None:
                    if len(errors) < 5:
                        errors.append(str(m.error()))
                    continue
                now, sent = time.monotonic_ns(), struct.unpack_from(">q", m.value() or b"")[0]
                if sent:  # 0: the warm-up record
                    lat_ns.append(now - sent)
        finally:
            c.close()

    reader = threading.Thread(target=consume, daemon=True)
    reader.start()
    time.sleep(1)  # let the consumer connect and issue its first fetch
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    pad = os.urandom(max(0, size - 8))
    p.produce(topic, struct.pack(">q", 0) + pad)  # connect and fetch metadata before the clock
    p.flush(60)
    t0 = time.monotonic()
    for i in range(n):
        # poll() returns as soon as it serves a delivery report: wait again until the slot
        # (one wait let the phase run at the round-trip rate, ~5,000 rec/s, not `rate`)
        while (delay := t0 + i / rate - time.monotonic()) > 0:
            p.poll(delay)  # serves delivery reports while waiting for the next slot
        p.produce(topic, struct.pack(">q", time.monotonic_ns()) + pad)
        p.poll(0)
    send_rps = n / (time.monotonic() - t0)  # shown with the phase: the rate it ran at
    p.flush(60)
    stop_at[0] = time.monotonic() + 30  # hang guard
    reader.join(60)
    if len(lat_ns) < n:
        return Outcome(error=f"received {len(lat_ns)}/{n}; errors: {errors}", command=shown)
    q = statistics.quantiles(lat_ns, n=100)
    return Outcome({"p50_ms": q[49] / 1e6, "p99_ms": q[98] / 1e6,
                    "max_ms": max(lat_ns) / 1e6, "send_rps": send_rps})  # fmt: skip


MANY_CLIENTS, MANY_PARTITIONS = 8, 64  # producers, and as many consumers; partitions
RC_DATA_ATTEMPTS = 3  # writes of the read_committed phase's data (untimed) before giving up
# librdkafka's read_committed passes: the phase's 5,000,000 records are 0.5 GB a pass, enough
# broker CPU to read in clock ticks without the five passes of the smaller phases.
RC_RDKAFKA_PASSES = 2
WORKER = Path(__file__).resolve().parent / "load_worker.py"


def many_clients(bootstrap: str, topic: str, per_client: int, size: int) -> Outcome:
    """8 producer and 8 consumer processes (librdkafka, bench/load_worker.py) at once on a
    64-partition topic: each producer writes `per_client` records spread evenly over every
    partition (acks=all), each consumer reads 8 partitions (assign(), from offset 0) until it
    has its share. Figures: the producers' aggregate rate (all records over the time from
    the first producer's start to the last one's end) and the consumers' (the same for them,
    so it includes waiting for the producers: records reach them as they are written)."""
    n = per_client - per_client % MANY_PARTITIONS  # every partition gets the same count
    share = MANY_PARTITIONS // MANY_CLIENTS
    cmds = [[sys.executable, str(WORKER), "produce", bootstrap, topic, str(n), str(size),
             str(MANY_PARTITIONS)] for _ in range(MANY_CLIENTS)]
    cmds += [[sys.executable, str(WORKER), "consume", bootstrap, topic, str(n),
              ",".join(str(k * share + j) for j in range(share))]
             for k in range(MANY_CLIENTS)]  # fmt: skip
    shown = (f"{MANY_CLIENTS} × load_worker.py produce ({n:,} × {size} B each, acks=all, "
             f"round-robin over {MANY_PARTITIONS} partitions) + {MANY_CLIENTS} × load_worker.py "
             f"consume ({share} partitions each, assign())")
    procs = [subprocess.Popen(c, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for c in cmds]  # fmt: skip
    try:
        for p in procs:  # every client connected and has the topic's metadata ...
            assert p.stdout is not None
            if p.stdout.readline().strip() != "ready":
                err = p.stderr.read() if p.stderr else ""
                return Outcome(error=f"a client did not start: {_tail(err)}", command=shown)
        for p in procs:  # ... then all start together
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        outs = []
        for p in procs:
            out, err = p.communicate(timeout=900)
            lines = out.strip().splitlines()
            if p.returncode != 0 or not lines:
                return Outcome(error=f"exit {p.returncode}\n{_tail(err)}", command=shown)
            outs.append(json.loads(lines[-1]))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    prod, cons = outs[:MANY_CLIENTS], outs[MANY_CLIENTS:]
    short = [o for o in outs if o["records"] < n or o["errors"]]
    if short:
        return Outcome(error=f"{len(short)} client(s) short of {n:,} records or with errors: "
                             f"{short[:2]}", command=shown)  # fmt: skip
    total = n * MANY_CLIENTS

    def rate(group: list[dict[str, float]]) -> float:
        return total / (max(o["end"] for o in group) - min(o["start"] for o in group))

    p_rate, c_rate = rate(prod), rate(cons)
    return Outcome({"rps": p_rate, "mbps": p_rate * size / MIB,
                    "consume_rps": c_rate, "consume_mbps": c_rate * size / MIB})


def rdkafka_transactional_data(bootstrap: str, topic: str, n: int, size: int,
                               per_txn: int = 1000, abort_every: int = 10) -> Outcome:
    """Fill `topic` (one partition) for the read_committed phase: transactions of `per_txn`
    records, every `abort_every`-th aborted (so consumers skip aborted data, as Kafka's
    read_committed fetch path has them do). Records: how many were committed."""
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"bench-rc-{topic}",
                  "linger.ms": 5, "batch.size": 1_000_000})  # fmt: skip
    payload = os.urandom(size)
    committed = 0
    try:
        p.init_transactions(60)
        for t in range(n // per_txn):
            p.begin_transaction()
            for _ in range(per_txn):
                while True:
                    try:
                        p.produce(topic, payload, partition=0)
                        break
                    except BufferError:
                        p.poll(0.01)
            if (t + 1) % abort_every == 0:
                # Written, then aborted: without the flush librdkafka drops what it has not sent
                # yet, so the aborted records would not all be in the log for consumers to skip.
                if p.flush(60):
                    raise KafkaException("records of a transaction to abort not written in 60 s")
                p.abort_transaction(60)
            else:
                p.commit_transaction(60)
                committed += per_txn
    except KafkaException as e:
        return Outcome(error=f"writing transactional data: {e}",
                       command=f"confluent_kafka transactional Producer to {topic}")
    return Outcome({"committed": float(committed)})


def end_offset_served(bootstrap: str, topic: str, expected: int, deadline: float) -> bool:
    """Poll ListOffsets (latest) until the partition reports `expected`; False at deadline."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-rec-{topic}",
                  "reconnect.backoff.ms": 20, "reconnect.backoff.max.ms": 100})  # fmt: skip
    try:
        while time.monotonic() < deadline:
            with contextlib.suppress(KafkaException):
                _lo, hi = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=2)
                if hi >= expected:
                    return True
            time.sleep(0.02)
        return False
    finally:
        c.close()


def _tail(out: str, lines: int = 25) -> str:
    return "\n".join(out.strip().splitlines()[-lines:])


def _shown(cmd: list[str]) -> str:
    # The class path is long and machine-specific: show the class and its arguments.
    i = next((k for k, a in enumerate(cmd) if a.startswith("org.apache.kafka.")), 0)
    return "java -cp <kafka 4.x lib>/* " + " ".join(cmd[i:])


# ------------------------------------------------------------------ one run against one broker

Results = dict[str, list[float]]  # metric key -> one value per run
Failures = list[dict[str, str]]


@dataclass
class Plan:
    sizes: dict[int, int]  # record size -> records per phase
    clients: tuple[str, ...]
    warmup: int
    tools_lib: Path
    txn_records: int = 0  # ProducerPerformance 100 B records in 100 ms transactions (0: skip)
    txn_seconds: float = 0  # seconds of one-record transactions (0: skip)
    latency_rate: int = 0  # produce→consume latency: records/s (0: skip) ...
    latency_seconds: float = 0  # ... for this long
    recovery_mib: int = 0  # MiB written before kill -9 and restart (0: skip)
    partitions: tuple[int, ...] = ()  # scale steps: partitions on the broker in total
    many_clients: int = 0  # records per producer in the many-clients phase (0: skip)
    rc_records: int = 0  # transactional records for the read_committed phase (0: skip)
    # Paced producers over many partitions (bench/many_partitions.py, issue 47): topic sizes,
    # records/s in all, seconds each; and the low-rate consume over many partitions.
    paced_partitions: tuple[int, ...] = ()
    paced_rates: tuple[int, ...] = ()
    paced_seconds: float = 20
    paced_consume: tuple[int, int] = (0, 0)  # (partitions, records/s); (0, 0): skip
    # Unmeasured paced runs first, the first row's shape, until two in a row cost the broker
    # alike a request (PACED_WARMUP_AGREE), at most this many: on 2 cores Kafka's JIT took
    # two 20 s runs of this load to settle (515 and 2,187 us a request, then 205, 145).
    paced_warmup_runs: int = 0
    # Issue 51's item 5 (bench/tls_lz4_txn.py, on a broker of their own with an SSL listener):
    # 1 KiB records over TLS, lz4 JSON-like 1 KiB records, parallel transactional producers.
    tls_records: int = 0
    lz4_records: int = 0
    txn_producers: int = 0
    # ProducerPerformance's own warm-up (--warmup-records) before a phase's measured records:
    # records by record size, else this share of the phase's records. The tool is a new JVM
    # per phase, and on 2 cores its C2 compiler runs for its first 7-11 s.
    producer_warmup: dict[int, int] = field(default_factory=dict)
    producer_warmup_share: float = 0.0

    def producer_warmup_records(self, n: int, size: int) -> int:
        return self.producer_warmup.get(size, int(n * self.producer_warmup_share))


def measured(
    broker: Broker, label: str, volume: int, job: Callable[[], Outcome],
    results: Results, failures: Failures,
) -> None:  # fmt: skip
    """Run one phase, recording its figures and the CPU it cost per GB moved: the broker's,
    and the load generator's (a Java tool is a waited-for child, librdkafka runs in this
    process; both are in own_seconds)."""
    cpu0, tool0 = cpu_seconds(broker.proc.pid), own_seconds()
    machine0, t0, procs0 = machine_cpu_seconds(), time.monotonic(), process_ticks()
    out = job()
    cpu, tool = cpu_seconds(broker.proc.pid) - cpu0, own_seconds() - tool0
    # Shares of the machine (all cores) over the phase, to tell a noisy phase from a slow one:
    # the hypervisor's steal, interrupts, and what neither broker nor load generator used.
    machine = {k: v - machine0[k] for k, v in machine_cpu_seconds().items()}
    capacity = (time.monotonic() - t0) * (os.cpu_count() or 1)
    shares = {"steal_pct": 100 * machine["steal"] / capacity,
              "irq_pct": 100 * machine["irq"] / capacity,
              "other_pct": 100 * max(0.0, machine["busy"] - machine["irq"] - machine["steal"]
                                     - cpu - tool) / capacity}
    print(f"  {broker.name:8} {label:32} ", end="")
    if out.error:
        print("FAILED")
        failures.append({"broker": broker.name, "phase": label, "command": out.command,
                         "error": out.error})  # fmt: skip
        return
    if volume:
        out.figures["cpu_s_per_gb"] = cpu / (volume / 1e9)
        out.figures["tool_cpu_s_per_gb"] = tool / (volume / 1e9)
    for k, v in {**out.figures, **shares}.items():
        results.setdefault(f"{label}|{k}", []).append(v)
    f = out.figures
    noise = (f"  steal {shares['steal_pct']:.1f}%  irq {shares['irq_pct']:.1f}%"
             f"  other {shares['other_pct']:.1f}%")
    if shares["other_pct"] >= 2:  # name what it was, if it lived through the phase
        exclude = {os.getpid(), *group_pids(broker.proc.pid)}
        if busiest := busiest_others(procs0, process_ticks(), exclude):
            noise += " (" + ", ".join(f"{name} {sec:.2f} s" for name, sec in busiest) + ")"
    if "rps" in f:
        print(f"{f['rps']:>12,.0f} rec/s {f['mbps']:8.1f} MB/s  cpu {cpu:.1f} s"
              f"  tool cpu {tool:.1f} s{noise}")
    else:
        print("  ".join(f"{k} {v:,.2f}" for k, v in f.items()
                        if k not in ("cpu_s_per_gb", "tool_cpu_s_per_gb"))
              + f"  cpu {cpu:.1f} s  tool cpu {tool:.1f} s{noise}")  # fmt: skip


def produce_job(client: str, tools: Path, b: str, topic: str, n: int, size: int,
                acks: str, warmup: int = 0) -> Callable[[], Outcome]:  # fmt: skip
    if client == "java":
        return lambda: java_produce(tools, b, topic, n, size, acks, warmup=warmup)
    return lambda: rdkafka_produce(b, topic, n, size, acks)


def consume_job(client: str, tools: Path, b: str, topic: str, n: int,
                size: int) -> Callable[[], Outcome]:  # fmt: skip
    if client == "java":
        return lambda: java_consume(tools, b, topic, n)
    return lambda: rdkafka_consume(b, topic, n, size, passes=RDKAFKA_CONSUME_PASSES)


def bench_broker(broker: Broker, plan: Plan, results: Results, failures: Failures) -> None:
    tools, b = plan.tools_lib, broker.bootstrap
    t0, busy0, own0 = time.monotonic(), machine_busy_seconds(), own_seconds()
    broker0 = cpu_seconds(broker.proc.pid)
    results.setdefault("startup_s", []).append(broker.startup_s)
    print(f"  {broker.name:8} start-up to first answer: {broker.startup_s:.2f} s")
    warm_topic = f"warmup-{time.time_ns()}"
    create_topic(b, warm_topic)  # warm-up: JIT for Kafka, imports/caches for Samsa; unmeasured
    java_produce(tools, b, warm_topic, plan.warmup, 100, "1")
    for client in plan.clients:
        for size, n in plan.sizes.items():
            stem = f"bench-{client}-{size}-{time.time_ns()}"
            topics = {acks: f"{stem}-acks{acks}" for acks in ("1", "all")}
            # librdkafka has no JIT to warm: its phases send just the measured records
            warm = plan.producer_warmup_records(n, size) if client == "java" else 0
            for acks, topic in topics.items():
                create_topic(b, topic)
                job = produce_job(client, tools, b, topic, n, size, acks, warm)
                label = f"produce {client} {size}B acks={acks}"
                # the broker's CPU over the whole run, per GB of all it was sent
                measured(broker, label, (n + warm) * size, job, results, failures)
            # Consume what acks=1 wrote, right after it was written (page cache warm for both).
            job = consume_job(client, tools, b, topics["1"], n, size)
            passes = RDKAFKA_CONSUME_PASSES if client == "rdkafka" else 1
            measured(broker, f"consume {client} {size}B", n * size * passes, job, results,
                     failures)
    bench_transactions_and_latency(broker, plan, results, failures)
    bench_many_clients_and_read_committed(broker, plan, results, failures)
    bench_paced_partitions(broker, plan, results, failures)
    results.setdefault("peak_rss_mib", []).append(peak_rss_mib(broker.proc.pid))
    # CPU that neither the broker nor our load generators used: other work on the machine.
    other = (machine_busy_seconds() - busy0) - (own_seconds() - own0) \
        - (cpu_seconds(broker.proc.pid) - broker0)
    share = max(0.0, other) / ((time.monotonic() - t0) * (os.cpu_count() or 1))
    results.setdefault("other_cpu_pct", []).append(100 * share)
    print(f"  {broker.name:8} CPU used by other processes during the run: {share:.0%}")
    if plan.recovery_mib:  # after peak RSS: it kills the broker (and so resets its RSS)
        bench_recovery(broker, plan.recovery_mib, results, failures)
    if plan.partitions:  # last: it leaves thousands of partitions on the broker
        bench_scale(broker, plan.partitions, results, failures)


def bench_transactions_and_latency(broker: Broker, plan: Plan, results: Results,
                                   failures: Failures) -> None:  # fmt: skip
    tools, b = plan.tools_lib, broker.bootstrap
    if plan.txn_records:
        n, topic = plan.txn_records, f"bench-txn100ms-{time.time_ns()}"
        create_topic(b, topic)
        extra = ("--transactional-id", f"bench-{topic}", "--transaction-duration-ms", "100")
        warm = plan.producer_warmup_records(n, 100)
        job = lambda: java_produce(tools, b, topic, n, 100, "all", extra, warm)  # noqa: E731
        measured(broker, "txn java 100B 100ms", (n + warm) * 100, job, results, failures)
    if plan.txn_seconds:
        topic = f"bench-txn1rec-{time.time_ns()}"
        create_topic(b, topic)
        job = lambda: rdkafka_txn_rate(b, topic, plan.txn_seconds)  # noqa: E731
        measured(broker, "txn rdkafka one-record", 0, job, results, failures)
    if plan.latency_rate and plan.latency_seconds:
        topic = f"bench-latency-{time.time_ns()}"
        create_topic(b, topic)
        job = lambda: rdkafka_latency(b, topic, plan.latency_rate, plan.latency_seconds, 100)  # noqa: E731
        measured(broker, "latency rdkafka", 0, job, results, failures)


def bench_many_clients_and_read_committed(broker: Broker, plan: Plan, results: Results,
                                          failures: Failures) -> None:  # fmt: skip
    tools, b = plan.tools_lib, broker.bootstrap
    if plan.many_clients:
        topic = f"bench-many-{time.time_ns()}"
        create_topic(b, topic, MANY_PARTITIONS)
        n = plan.many_clients - plan.many_clients % MANY_PARTITIONS
        job = lambda: many_clients(b, topic, n, 100)  # noqa: E731
        measured(broker, "many clients 100B", n * MANY_CLIENTS * 100, job, results, failures)
    if plan.rc_records:
        # The write is not timed: a failed one is shown and tried again on a new topic (Kafka
        # 4.3.1 once answered librdkafka's EndTxn with INVALID_TXN_STATE, fatal to the producer).
        for attempt in range(1, RC_DATA_ATTEMPTS + 1):
            topic = f"bench-rc-{time.time_ns()}"
            create_topic(b, topic)
            filled = rdkafka_transactional_data(b, topic, plan.rc_records, 100)
            if not filled.error:
                break
            phase = f"read_committed data (untimed write, attempt {attempt} of {RC_DATA_ATTEMPTS})"
            failures.append({"broker": broker.name, "phase": phase,
                             "command": filled.command, "error": filled.error})  # fmt: skip
            print(f"  {broker.name:8} {phase}: FAILED")
        else:
            return
        n = int(filled.figures["committed"])
        rc = ("--command-property", "isolation.level=read_committed")
        job = lambda: java_consume(tools, b, topic, n, rc)  # noqa: E731
        measured(broker, "consume java 100B read_committed", n * 100, job, results, failures)
        extra: dict[str, object] = {"isolation.level": "read_committed"}
        passes = RC_RDKAFKA_PASSES
        job = lambda: rdkafka_consume(b, topic, n, 100, extra, passes)  # noqa: E731
        measured(broker, "consume rdkafka 100B read_committed", n * 100 * passes, job, results,
                 failures)


def paced_job(broker: Broker, partitions: int, rate: int, seconds: float,
              consume: bool) -> Callable[[], Outcome]:
    def job() -> Outcome:
        import many_partitions  # bench/many_partitions.py, which imports this module

        shown = (f"{many_partitions.WORKERS} × many_partitions.py produce (librdkafka, acks=all, "
                 f"idempotent, linger.ms 5, keyed {many_partitions.SIZE} B) paced at {rate:,} "
                 f"rec/s in all over {partitions} partitions for {seconds:.0f} s"
                 + (f" + {many_partitions.CONSUMERS} consumers (assign())" if consume else ""))
        try:
            f = many_partitions.run_load(broker.proc.pid, broker.bootstrap, partitions, rate,
                                         seconds, consume)
        except RuntimeError as e:
            return Outcome(error=str(e), command=shown)
        if f["errors"] or f["records"] < rate * seconds * 0.99:
            return Outcome(error=f"{f['records']:,.0f} records delivered, {f['errors']:.0f} "
                                 "errors", command=shown)  # fmt: skip
        keys: tuple[str, ...] = ("p50_ms", "p99_ms", "p999_ms", "cpu_us_per_request",
                                 "sent_rps")
        keys += ("e2e_p50_ms", "e2e_p99_ms", "e2e_p999_ms") if consume else ()
        return Outcome({k: f[k] for k in keys})
    return job


PACED_WARMUP_AGREE = 0.2  # two warm-up runs within 20 % of each other's CPU a request: warm


def warm_up_paced(broker: Broker, partitions: int, rate: int, seconds: float,
                  max_runs: int) -> None:
    """Paced runs of this shape, not measured, until the broker's CPU per request settles (at
    least two, at most `max_runs`): the rows after them measure a warm broker, as
    ProducerPerformance's figures are taken after its --warmup-records."""
    import many_partitions  # bench/many_partitions.py, which imports this module

    costs: list[float] = []
    for _ in range(max_runs):
        try:
            f = many_partitions.run_load(broker.proc.pid, broker.bootstrap, partitions, rate,
                                         seconds, False)
        except RuntimeError as e:
            print(f"  {broker.name:8} paced warm-up: {e}")
            return
        costs.append(f["cpu_us_per_request"])
        print(f"  {broker.name:8} paced warm-up {partitions}p {rate} (not measured): p50 "
              f"{f['p50_ms']:,.1f} ms, {costs[-1]:,.0f} us a request")
        if len(costs) >= 2 and abs(costs[-1] - costs[-2]) <= PACED_WARMUP_AGREE * costs[-2]:
            return


def bench_paced_partitions(broker: Broker, plan: Plan, results: Results,
                           failures: Failures) -> None:  # fmt: skip
    """Small batches over many partitions at a fraction of capacity (issue 47): latency, and
    the broker's CPU per request."""
    if plan.paced_warmup_runs and plan.paced_partitions and plan.paced_rates:
        warm_up_paced(broker, plan.paced_partitions[0], plan.paced_rates[0],
                      plan.paced_seconds, plan.paced_warmup_runs)
    for partitions in plan.paced_partitions:
        for rate in plan.paced_rates:
            job = paced_job(broker, partitions, rate, plan.paced_seconds, False)
            measured(broker, f"paced {partitions}p {rate}", 0, job, results, failures)
    partitions, rate = plan.paced_consume
    if partitions and rate:
        job = paced_job(broker, partitions, rate, plan.paced_seconds, True)
        measured(broker, f"paced consume {partitions}p {rate}", 0, job, results, failures)


def bench_recovery(broker: Broker, mib: int, results: Results, failures: Failures) -> None:
    """Write `mib` MiB to one partition (acks=all), kill -9 the broker, restart it on the same
    data and time (a) the first answered ApiVersions and (b) the partition serving its end
    offset again (ListOffsets latest = records written), both from the restart."""
    b, topic = broker.bootstrap, f"bench-recovery-{time.time_ns()}"
    n = mib * MIB // 1024
    create_topic(b, topic)
    out = rdkafka_produce(b, topic, n, 1024, "all")
    label = f"recovery after kill -9 with {mib} MiB"
    if out.error:
        failures.append({"broker": broker.name, "phase": label, "command": out.command,
                         "error": out.error})  # fmt: skip
        print(f"  {broker.name:8} {label}: writing the log FAILED")
        return
    broker.kill9()
    t0 = time.monotonic()
    first = broker.restart()
    served = end_offset_served(b, topic, n, t0 + 600)
    if not served:
        failures.append({"broker": broker.name, "phase": label, "command": "",
                         "error": f"end offset {n} not served 600 s after restart"})  # fmt: skip
        print(f"  {broker.name:8} {label}: FAILED (end offset not served)")
        return
    total = time.monotonic() - t0
    results.setdefault("recovery|first_s", []).append(first)
    results.setdefault("recovery|served_s", []).append(total)
    print(f"  {broker.name:8} {label}: first answer {first:.2f} s, end offset served {total:.2f} s")


def open_fds(pgid: int) -> int:
    n = 0
    for pid in group_pids(pgid):
        with contextlib.suppress(OSError):
            n += len(os.listdir(f"/proc/{pid}/fd"))
    return n


def end_offsets(bootstrap: str, wanted: dict[TopicPartition, OffsetSpec],
                deadline: float) -> dict[TopicPartition, int]:
    """ListOffsets for every partition, asking again for those that got an error (Kafka
    answers UNKNOWN_LEADER_EPOCH for a while after a restart, until its metadata caught up)
    until `deadline`; then the last error is raised. Each round is a new client: librdkafka's
    admin ListOffsets drops its metadata only on NOT_LEADER_OR_FOLLOWER and
    LEADER_NOT_AVAILABLE, and goes on sending a fenced leader epoch (against either broker)."""
    got: dict[TopicPartition, int] = {}
    pending = dict(wanted)
    last_error = ""
    while pending and time.monotonic() < deadline:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for tp, f in admin.list_offsets(pending, request_timeout=300).items():
            try:
                got[tp] = f.result().offset
                del pending[tp]
            except KafkaException as e:
                last_error = f"ListOffsets {tp.topic}-{tp.partition}: {e.args[0].str()}"
        del admin
        if pending:
            time.sleep(0.5)
    if pending:
        raise RuntimeError(f"{len(pending)} partitions without an end offset; {last_error}")
    return got


def wait_all_led(admin: AdminClient, topics: dict[str, int], deadline: float) -> bool:
    """Until a full Metadata request shows every partition of `topics` with a leader."""
    while time.monotonic() < deadline:
        with contextlib.suppress(KafkaException):
            md = admin.list_topics(timeout=30).topics
            if all(t in md and md[t].error is None and len(md[t].partitions) == n
                   and all(pm.leader >= 0 for pm in md[t].partitions.values())
                   for t, n in topics.items()):  # fmt: skip
                return True
        time.sleep(0.2)
    return False


def metadata_round_trips(bootstrap: str, rounds: int = 21) -> list[float]:
    """Milliseconds from sending a Metadata v12 request for all topics to having its whole
    answer, `rounds` times over one connection after one unmeasured: the broker's answer
    and its transfer, without a client's parsing of it (which, through librdkafka's admin
    client and confluent-kafka's objects, takes 10-20 ms at a few thousand partitions against
    either broker and hides the broker's part)."""
    host, port = bootstrap.rsplit(":", 1)
    client_id = b"bench-metadata"
    times = []
    try:
        with socket.create_connection((host, int(port)), timeout=120) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for correlation in range(rounds + 1):
                # header v2 (api key 3, version 12, correlation id, client id, no tags); body:
                # topics null (all), allow auto-creation, no authorized operations, no tags
                request = (struct.pack(">hhih", 3, 12, correlation, len(client_id)) + client_id
                           + b"\x00" + b"\x00\x01\x00\x00")
                t0 = time.perf_counter()
                sock.sendall(struct.pack(">i", len(request)) + request)
                (size,) = struct.unpack(">i", _recv_exact(sock, 4))
                answer = _recv_exact(sock, size)
                elapsed = time.perf_counter() - t0
                if struct.unpack_from(">i", answer)[0] != correlation:
                    raise RuntimeError("a Metadata answer with another correlation id")
                if correlation:
                    times.append(1000 * elapsed)
    except OSError as e:  # the step fails, as its other requests' failures do
        raise RuntimeError(f"Metadata by hand: {e}") from e
    return times


def bench_scale(broker: Broker, steps: tuple[int, ...], results: Results,
                failures: Failures) -> None:  # fmt: skip
    """Grow the broker to each total partition count in `steps` (new topics of the difference),
    write one 100 B record to every new partition, then measure: topic creation time, Metadata
    (all topics) latency (a raw request's round trip, and through librdkafka's admin client),
    RSS and open files, and a clean restart (SIGTERM, start) to the first answer and to every
    partition having a leader again."""
    topics: dict[str, int] = {}
    records: dict[str, int] = {}  # records in every partition of each topic
    have = 0
    for total in steps:
        label = f"scale {total}"
        add, b = total - have, broker.bootstrap
        if add <= 0:
            continue
        if any(f["broker"] == broker.name and f["phase"] == label for f in failures):
            # a step that failed once waits out its 600 s deadlines again: once is the finding
            print(f"  {broker.name:8} {label} partitions: skipped (failed in an earlier run)")
            return
        topic = f"bench-scale-{total}-{time.time_ns()}"
        admin = AdminClient({"bootstrap.servers": b, "socket.timeout.ms": 300_000})
        try:
            t0 = time.monotonic()
            admin.create_topics([NewTopic(topic, add, 1)], operation_timeout=600,
                                request_timeout=600)[topic].result(600)  # fmt: skip
            topics[topic], records[topic] = add, 0
            if not wait_all_led(admin, topics, t0 + 600):
                raise RuntimeError(f"not every partition had a leader 600 s after creating {add}")
            create_s = time.monotonic() - t0
            have = total
            prod = Producer({"bootstrap.servers": b, "linger.ms": 5, "acks": "1"})
            for part in range(add):
                prod.produce(topic, b"x" * 100, partition=part)
                prod.poll(0)
            if prod.flush(600):
                raise RuntimeError(f"could not write one record to each of {add} partitions")
            records[topic] += 1
            answer_ms = metadata_round_trips(b)
            lat = []
            for _ in range(5):
                m0 = time.perf_counter()
                admin.list_topics(timeout=120)
                lat.append(time.perf_counter() - m0)
            rss, fds = status_mib(broker.proc.pid, "VmRSS"), open_fds(broker.proc.pid)
            del prod, admin  # closed now: no reconnect attempts (and log lines) while it is down
            t0, logged = time.monotonic(), broker.log.stat().st_size
            if not stop(broker.proc, grace=300):
                raise RuntimeError(f"no clean shutdown within 300 s of SIGTERM with {total} "
                                   "partitions (SIGKILLed)")  # fmt: skip
            with open(broker.log, "rb") as f:  # a node's supervisor kills a late process
                f.seek(logged)
                if b"ignored SIGTERM" in f.read():
                    raise RuntimeError(f"a process of the node, stopped with {total} "
                                       "partitions, was killed by its supervisor after 60 s")
            shutdown = time.monotonic() - t0
            t0 = time.monotonic()
            first = broker.restart()
            admin = AdminClient({"bootstrap.servers": b})
            if not wait_all_led(admin, topics, t0 + 600):
                raise RuntimeError("not every partition had a leader 600 s after the restart")
            ready = time.monotonic() - t0
            fds_restarted = open_fds(broker.proc.pid)
            del admin  # no reconnect attempts (and log lines) while the broker is killed
            crash_first, crash_ready = scale_kill9(broker, topics, records)
        except (RuntimeError, KafkaException) as e:
            failures.append({"broker": broker.name, "phase": label, "command": "", "error": str(e)})
            print(f"  {broker.name:8} {label} partitions: FAILED ({e})")
            gc.collect()  # clients held by the traceback's frames stop reconnecting now
            return  # the next step would only grow what failed
        figures = {"create_s": create_s, "metadata_ms": statistics.median(answer_ms),
                   "metadata_client_ms": 1000 * statistics.median(lat),
                   "rss_mib": rss, "fds": float(fds), "shutdown_s": shutdown,
                   "restart_first_s": first,
                   "restart_ready_s": ready, "restart_fds": float(fds_restarted),
                   "kill9_first_s": crash_first, "kill9_ready_s": crash_ready}  # fmt: skip
        for k, v in figures.items():
            results.setdefault(f"{label}|{k}", []).append(v)
        print(f"  {broker.name:8} {total:,} partitions: created in {create_s:.1f} s, Metadata "
              f"{figures['metadata_ms']:.2f} ms (admin client "
              f"{figures['metadata_client_ms']:.0f} ms), RSS {rss:.0f} MiB, {fds} fds, shutdown "
              f"{shutdown:.1f} s, restart {first:.1f} s / all led {ready:.1f} s ({fds_restarted} "
              f"fds), kill -9 restart {crash_first:.1f} s / all led and end offsets served "
              f"{crash_ready:.1f} s")  # fmt: skip


def scale_kill9(broker: Broker, topics: dict[str, int],
                records: dict[str, int]) -> tuple[float, float]:
    """One more record (acks=all) to every partition, kill -9, restart: seconds to the first
    answer and to every partition led with its end offset (ListOffsets latest) = records
    acknowledged, i.e. recovery of all those partitions succeeded and lost nothing."""
    b = broker.bootstrap
    # idempotent: a retried request is not written twice; every delivery report looked at
    prod = Producer({"bootstrap.servers": b, "linger.ms": 5, "acks": "all",
                     "enable.idempotence": True})
    failed: list[str] = []

    def delivered(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            failed.append(f"{msg.topic()}-{msg.partition()}: {err.str()}")

    for topic, n in topics.items():
        for part in range(n):
            prod.produce(topic, b"y" * 100, partition=part, on_delivery=delivered)
            prod.poll(0)
    if prod.flush(600) or failed:
        raise RuntimeError("could not write one more record to every partition before kill -9"
                           + (f": {len(failed)} failed, e.g. {failed[0]}" if failed else ""))
    del prod
    for topic in topics:
        records[topic] += 1
    broker.kill9()
    t0 = time.monotonic()
    first = broker.restart()
    admin = AdminClient({"bootstrap.servers": b})
    if not wait_all_led(admin, topics, t0 + 600):
        raise RuntimeError("not every partition had a leader 600 s after kill -9 and restart")
    wanted = {TopicPartition(t, p): OffsetSpec.latest() for t, n in topics.items()
              for p in range(n)}  # fmt: skip
    del admin
    got = end_offsets(b, wanted, t0 + 600)
    short = [tp for tp, off in got.items() if off != records[tp.topic]]
    if short or len(got) != len(wanted):
        seen = ", ".join(f"{tp.topic}-{tp.partition} at {got[tp]} (not {records[tp.topic]})"
                         for tp in short[:3])
        raise RuntimeError(f"after kill -9: {len(short)} partitions do not end where the "
                           f"acknowledged records do, e.g. {seen}")  # fmt: skip
    return first, time.monotonic() - t0


# ------------------------------------------------------------------ report


def median(results: Results, key: str) -> float | None:
    vals = results.get(key)
    return statistics.median(vals) if vals else None


def table_rows(plan: Plan) -> list[tuple[str, str, str, bool]]:
    """(label, metric key, unit, higher is better) in display order."""
    rows = [("start-up: process start → first ApiVersions answer (a node: from every "
             "process)", "startup_s", "s", False),
            ("peak RSS (VmHWM) over the whole run (a node: its processes' summed)",
             "peak_rss_mib", "MiB", False),
            ("(noise) machine CPU used by other processes", "other_cpu_pct", "%", False)]
    for client in plan.clients:
        name = "ProducerPerformance" if client == "java" else "librdkafka"
        for size in plan.sizes:
            for acks in ("1", "all"):
                p = f"produce {client} {size}B acks={acks}"
                rows.append((f"{name} produce {size} B acks={acks}", f"{p}|rps", "rec/s", True))
                if client == "java":
                    for k in ("avg", "p50", "p99"):
                        rows.append((f"  … latency {k}", f"{p}|{k}_ms", "ms", False))
                rows.append(("  … broker CPU per GB written", f"{p}|cpu_s_per_gb", "s/GB", False))
                rows.append(("  … (not compared) the load generator's CPU per GB written",
                             f"{p}|tool_cpu_s_per_gb", "s/GB", False))
                if client == "java":
                    rows.append(("  … (not compared) the tool's JIT compiler while measured",
                                 f"{p}|tool_jit_cores", "cores", False))
        cname = "ConsumerPerformance" if client == "java" else "librdkafka"
        for size in plan.sizes:
            c = f"consume {client} {size}B"
            rows.append((f"{cname} consume {size} B", f"{c}|rps", "rec/s", True))
            rows.append(("  … broker CPU per GB read", f"{c}|cpu_s_per_gb", "s/GB", False))
    if plan.txn_records:
        t = "txn java 100B 100ms"
        rows += [("ProducerPerformance transactional 100 B, 100 ms transactions", f"{t}|rps",
                  "rec/s", True),
                 ("  … latency p99", f"{t}|p99_ms", "ms", False),
                 ("  … broker CPU per GB written", f"{t}|cpu_s_per_gb", "s/GB", False)]
    if plan.txn_seconds:
        rows.append(("librdkafka one-record transactions (begin, produce, commit)",
                     "txn rdkafka one-record|tps", "txn/s", True))  # fmt: skip
    if plan.latency_rate and plan.latency_seconds:
        lat = f"produce→consume latency at {plan.latency_rate:,} rec/s (librdkafka, acks=all)"
        rows += [(f"{lat} p50", "latency rdkafka|p50_ms", "ms", False),
                 ("  … p99", "latency rdkafka|p99_ms", "ms", False)]
    if plan.many_clients:
        m = "many clients 100B"
        rows += [(f"{MANY_CLIENTS} librdkafka producers + {MANY_CLIENTS} consumers, "
                  f"{MANY_PARTITIONS} partitions, 100 B acks=all: produce", f"{m}|rps", "rec/s",
                  True),
                 ("  … consume (alongside)", f"{m}|consume_rps", "rec/s", True),
                 ("  … broker CPU per GB written (and read)", f"{m}|cpu_s_per_gb", "s/GB",
                  False)]  # fmt: skip
    if plan.rc_records:
        for client, name in (("java", "ConsumerPerformance"), ("rdkafka", "librdkafka")):
            c = f"consume {client} 100B read_committed"
            rows += [(f"{name} consume read_committed, transactional 100 B (1 in 10 "
                      "transactions aborted)", f"{c}|rps", "rec/s", True),
                     ("  … broker CPU per GB read", f"{c}|cpu_s_per_gb", "s/GB", False)]
    for partitions in plan.paced_partitions:
        for rate in plan.paced_rates:
            pk = f"paced {partitions}p {rate}"
            rows += [(f"{partitions:,} partitions, librdkafka keyed 200 B acks=all paced at "
                      f"{rate:,} rec/s: produce latency p50", f"{pk}|p50_ms", "ms", False),
                     ("  … p99", f"{pk}|p99_ms", "ms", False),
                     ("  … p99.9", f"{pk}|p999_ms", "ms", False),
                     ("  … broker CPU per Produce request", f"{pk}|cpu_us_per_request", "us",
                      False)]  # fmt: skip
    if plan.paced_consume[0] and plan.paced_consume[1]:
        partitions, rate = plan.paced_consume
        ck = f"paced consume {partitions}p {rate}"
        rows += [(f"{partitions:,} partitions at {rate:,} rec/s, consumers of all of them: "
                  "produce→consume latency p50", f"{ck}|e2e_p50_ms", "ms", False),
                 ("  … p99", f"{ck}|e2e_p99_ms", "ms", False),
                 ("  … broker CPU per request (Produce and Fetch)", f"{ck}|cpu_us_per_request",
                  "us", False)]  # fmt: skip
    rows += item5_rows(plan)
    if plan.recovery_mib:
        rec = f"kill -9 with {plan.recovery_mib:,} MiB of log, restart →"
        rows += [(f"{rec} first ApiVersions answer", "recovery|first_s", "s", False),
                 ("  … → end offset served (ListOffsets)", "recovery|served_s", "s", False)]
    for total in plan.partitions:
        sc = f"scale {total}"
        rows += [(f"{total:,} partitions on the broker: create (→ all led)", f"{sc}|create_s",
                  "s", False),
                 ("  … Metadata (all topics): the answer's round trip", f"{sc}|metadata_ms",
                  "ms", False),
                 ("  … (not compared) Metadata through librdkafka's admin client (mostly its "
                  "parse)", f"{sc}|metadata_client_ms", "ms", False),
                 ("  … RSS", f"{sc}|rss_mib", "MiB", False),
                 ("  … open files", f"{sc}|fds", "fds", False),
                 ("  … clean shutdown (SIGTERM → exit)", f"{sc}|shutdown_s", "s", False),
                 ("  … clean restart → first answer", f"{sc}|restart_first_s", "s", False),
                 ("  … clean restart → all partitions led", f"{sc}|restart_ready_s", "s",
                  False),
                 ("  … open files after the restart", f"{sc}|restart_fds", "fds", False),
                 ("  … kill -9 after one more record each, restart → first answer",
                  f"{sc}|kill9_first_s", "s", False),
                 ("  … kill -9 → all led, every end offset served", f"{sc}|kill9_ready_s", "s",
                  False)]  # fmt: skip
    return rows


def item5_rows(plan: Plan) -> list[tuple[str, str, str, bool]]:
    rows = []
    if plan.tls_records:
        for verb, k, what in (("produce", "produce rdkafka TLS 1024B", "written"),
                              ("consume", "consume rdkafka TLS 1024B", "read")):
            rows += [(f"librdkafka {verb} 1 KiB over TLS", f"{k}|rps", "rec/s", True),
                     (f"  … broker CPU per GB {what}", f"{k}|cpu_s_per_gb", "s/GB", False)]
    if plan.lz4_records:
        k = "produce rdkafka lz4 JSON 1KiB"
        rows += [("librdkafka produce lz4, JSON-like 1 KiB", f"{k}|rps", "rec/s", True),
                 ("  … broker CPU per GB written (uncompressed)", f"{k}|cpu_s_per_gb", "s/GB",
                  False)]  # fmt: skip
    if plan.txn_producers:
        k = f"txn rdkafka {plan.txn_producers}x10-record"
        rows += [(f"{plan.txn_producers} librdkafka producers, 10-record transactions in "
                  "parallel", f"{k}|tps", "txn/s", True),
                 ("  … broker CPU per transaction", f"{k}|cpu_ms_per_tx", "ms", False)]
    return rows


def bench_item5(name: str, kafka_lib: Path | None, plan: Plan, args: argparse.Namespace,
                results: Results, failures: Failures) -> None:
    """Issue 51's item-5 rows on a broker of their own (bench/tls_lz4_txn.py)."""
    if not (plan.tls_records or plan.lz4_records or plan.txn_producers):
        return
    sys.modules.setdefault("run", sys.modules[__name__])  # one module: one LIVE_GROUPS
    from tls_lz4_txn import Rows, bench_rows

    rows = Rows(plan.tls_records, plan.lz4_records, plan.txn_producers, args.txn_seconds or 20)
    bench_rows(name, kafka_lib, rows, results, failures)


def comparable_key(key: str) -> bool:
    """Whether a row compares the brokers. Not the noise row, nor the load generator's CPU
    or its JIT compiler's: they are shown because on 2 cores the tool and the broker share
    one CPU budget (a phase's rate can follow the two together), but they are the client's
    figures, not the broker's; nor Metadata's latency through librdkafka's admin client, most
    of which is the client's parse of the answer."""
    return key != "other_cpu_pct" and not key.endswith(("|tool_cpu_s_per_gb",
                                                        "|tool_jit_cores",
                                                        "|metadata_client_ms"))


def samsa_columns(res: dict[str, Results]) -> list[str]:
    """The Samsa columns measured, the single process first, then by a node's processes."""
    return sorted((b for b in res if b != "kafka"), key=samsa_processes)


def shown(name: str) -> str:
    return name.replace("samsa", "Samsa").replace("kafka", "Kafka")


def ratio_rows(plan: Plan, res: dict[str, Results]) -> list[tuple[str, float, bool]]:
    """The table's rows that have a ratio, for the plot; a sub-row is named after its row,
    and a node's ratio after its column ("Samsa x2: ...") below the single process's."""
    rows, parent = [], ""
    for label, key, _unit, higher in table_rows(plan):
        if not label.startswith("  "):
            parent = label
        name = f"{parent}: {label.strip(' …→')}" if label.startswith("  ") else label
        k = median(res.get("kafka", {}), key)
        for column in samsa_columns(res):
            s = median(res[column], key)
            if s is not None and k and comparable_key(key):
                prefix = "" if column == "samsa" else f"{shown(column)}: "
                rows.append((prefix + name, s / k, higher))
    return rows


def fmt(v: float | None, unit: str, mbps: float | None = None) -> str:
    if v is None:
        return "failed"
    text = f"{v:,.0f}" if abs(v) >= 100 else f"{v:.2f}"
    text += f" {unit}"
    if mbps is not None:
        text += f" ({mbps:.1f} MB/s)"
    return text


def render_table(plan: Plan, res: dict[str, Results], kafka_note: str) -> str:
    """A column per Samsa broker measured (one process, then each node of --processes), then
    Kafka's, then each Samsa column over Kafka's."""
    kafka_head = "Kafka" if "kafka" in res else f"Kafka: {kafka_note}"
    columns = samsa_columns(res) or ["samsa"]
    heads = [shown(c) for c in columns]
    lines = [f"| measurement | {' | '.join(heads)} | {kafka_head} | "
             f"{' | '.join(f'{h}/Kafka' for h in heads)} | better |",
             "|---|" + "---:|" * (2 * len(columns) + 1) + "---|"]  # fmt: skip
    for label, key, unit, higher in table_rows(plan):
        mb_key = key.replace("|rps", "|mbps") if key.endswith("|rps") else None
        cells = []
        for broker in (*columns, "kafka"):
            if broker not in res:
                cells.append("unavailable" if broker == "kafka" else "not run")
                continue
            v = median(res[broker], key)
            cells.append(fmt(v, unit, median(res[broker], mb_key) if mb_key and v else None))
        k = median(res.get("kafka", {}), key)
        for column in columns:
            s = median(res.get(column, {}), key)
            cells.append(f"{s / k:.2f}×" if s is not None and k and comparable_key(key) else "–")
        lines.append(f"| {label} | {' | '.join(cells)} | "
                     f"{'higher' if higher else 'lower'} |")  # fmt: skip
    return "\n".join(lines)


def environment(args: argparse.Namespace, plan: Plan, kafka_note: str) -> list[str]:
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text()
                .splitlines() if ln.startswith("model name")), platform.processor())  # fmt: skip
    mem = int(Path("/proc/meminfo").read_text().split()[1]) / MIB
    git = subprocess.run(["git", "-C", str(REPO), "describe", "--always", "--dirty"],
                         capture_output=True, text=True).stdout.strip() or "?"  # fmt: skip
    sizes = ", ".join(f"{n:,} × {s} B" for s, n in plan.sizes.items())
    warmups = ", ".join(f"{plan.producer_warmup_records(n, s):,} records more at {s} B"
                        for s, n in plan.sizes.items())
    return [
        f"- Date: {dt.datetime.now().astimezone():%Y-%m-%d %H:%M %Z}",
        f"- Machine: {cpu}, {os.cpu_count()} cores, {mem:.0f} GiB RAM, "
        f"{platform.system()} {platform.release()}; data in {tempfile.gettempdir()} "
        f"({_fstype(Path(tempfile.gettempdir()))})",
        f"- Samsa {importlib.metadata.version('samsa')} (git {git}), Python "
        f"{platform.python_version()} (from {sys.base_prefix}), started as `samsa serve` with "
        "default settings" + nodes(args),
        f"- Before the runs, {args.touched_gib:.1f} GiB of the machine's free "
        "memory was written once and given back (bench/run.py, touch_free_memory)",
        f"- Kafka: {kafka_note}; JVM: {java.splitlines()[0] if java else '?'}",
        f"- Load: {sizes} per phase, ProducerPerformance's figures after its own warm-up "
        f"of {warmups} (--warmup-records); Kafka tools "
        f"{jar_version(plan.tools_lib, 'kafka-tools')}; librdkafka {rdkafka_libversion()[0]} "
        f"(confluent-kafka {importlib.metadata.version('confluent-kafka')}); its consumers "
        f"read each topic {RDKAFKA_CONSUME_PASSES} times over ({RC_RDKAFKA_PASSES} for "
        "read_committed)",
        f"- Each figure: median of {args.runs} run(s); every run starts a fresh broker "
        f"with an empty data dir and a {plan.warmup:,}-record unmeasured warm-up",
        f"- Extra phases: {plan.txn_records:,} records in 100 ms transactions; "
        f"{plan.txn_seconds:g} s of one-record transactions; latency at "
        f"{plan.latency_rate:,} rec/s for {plan.latency_seconds:g} s (100 B); "
        f"{MANY_CLIENTS}+{MANY_CLIENTS} clients × {plan.many_clients:,} records on "
        f"{MANY_PARTITIONS} partitions; {plan.rc_records:,} transactional records read with "
        f"read_committed; paced produce over "
        f"{', '.join(f'{p:,}' for p in plan.paced_partitions) or 'no'} partitions at "
        f"{', '.join(f'{r:,}' for r in plan.paced_rates) or '-'} rec/s for "
        f"{plan.paced_seconds:g} s each after unmeasured runs of the first until the broker's "
        f"CPU a request settles (two in a row within {PACED_WARMUP_AGREE:.0%}, at most "
        f"{plan.paced_warmup_runs}), and consume of {plan.paced_consume[0]:,} partitions "
        f"at {plan.paced_consume[1]:,} rec/s; "
        f"kill -9 after {plan.recovery_mib:,} MiB (1 KiB records, acks=all); partition scale "
        f"steps {', '.join(f'{p:,}' for p in plan.partitions) or 'none'}; on a broker of "
        f"their own with an SSL listener: {plan.tls_records:,} × 1 KiB over TLS, "
        f"{plan.lz4_records:,} JSON-like 1 KiB records lz4-compressed, {plan.txn_producers} "
        f"producers of 10-record transactions for {args.txn_seconds or 20:g} s",
    ]


def nodes(args: argparse.Namespace) -> str:
    """The environment line's words on the node columns: what runs, and the topic layout."""
    counts = [n for n in args.processes if n > 1]
    if not counts or args.only == "kafka":
        return ""
    names = ", ".join(f"`--processes {n}` (column Samsa x{n})" for n in counts)
    return (f"; and as a node, {names}: broker ids 0.. on consecutive ports, without "
            "ZooKeeper (its processes share the node's SQLite metadata file), clients given "
            "the first port and finding the others through Metadata, the node's CPU and "
            "memory those of the supervisor and all its processes. Every column gets the same "
            "topics: the produce, consume, transaction, latency, read_committed, TLS and lz4 "
            "rows use one partition, so one process of a node serves their records (the "
            "others answer Metadata, and may be a transaction's or group's coordinator); "
            "the 64-partition, paced many-partition, parallel-transaction and scale rows "
            "spread over the node's processes; recovery kills -9 every process of the node")


def _fstype(path: Path) -> str:
    best = ("", "?")
    for line in Path("/proc/mounts").read_text().splitlines():
        _dev, mnt, fs = line.split()[:3]
        if str(path).startswith(mnt) and len(mnt) > len(best[0]):
            best = (mnt, fs)
    return best[1]


def render_failures(failures: Failures) -> str:
    if not failures:
        return "None: every load generator completed against every broker."
    seen: dict[tuple[str, str], dict[str, str]] = {}
    counts: dict[tuple[str, str], int] = {}
    for f in failures:
        key = (f["broker"], f["phase"])
        seen.setdefault(key, f)
        counts[key] = counts.get(key, 0) + 1
    parts = []
    for (broker, phase), f in seen.items():
        head = f"- **{shown(broker)}**, {phase} (failed in {counts[broker, phase]} run(s)):\n"
        cmd = f"  `{f['command']}`\n\n" if f["command"] else ""
        parts.append(f"{head}{cmd}  ```\n{_indent(_tail(f['error'], 12))}\n  ```")
    return "\n".join(parts)


def _indent(text: str) -> str:
    return "\n".join("  " + ln for ln in text.splitlines())


def write_doc(section: str) -> None:
    body = DOC.read_text() if DOC.exists() else DEFAULT_DOC
    if RESULTS_START not in body or RESULTS_END not in body:
        body = body.rstrip() + f"\n\n## Results\n\n{RESULTS_START}\n{RESULTS_END}\n"
    head, rest = body.split(RESULTS_START, 1)
    tail = rest.split(RESULTS_END, 1)[1]
    DOC.write_text(f"{head}{RESULTS_START}\n{section}\n{RESULTS_END}{tail}")
    print(f"wrote {DOC.relative_to(REPO)}")


DEFAULT_DOC = f"""# Performance: Samsa next to Apache Kafka

Run `make bench` (or `.venv/bin/python bench/run.py`; `--quick` for a smoke run).

## Results

{RESULTS_START}
{RESULTS_END}
"""


# ------------------------------------------------------------------ main


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--runs", type=int, default=3, help="runs per broker; figures are medians")
    # 4,000,000 × 100 B: ProducerPerformance measures ~6 s of it, longer than the bursts of
    # the hypervisor's steal seen here (a third of the machine for ~2 s)
    ap.add_argument("--records", default="100=4000000,1024=1000000",
                    help="record size=records per phase, comma-separated")
    ap.add_argument("--producer-warmup", default="100=6000000,1024=1500000",
                    metavar="SIZE=RECORDS,...",
                    help="ProducerPerformance sends this many records of a size first, outside "
                         "its figures (--warmup-records): until its JIT compiler is done")
    ap.add_argument("--producer-warmup-share", type=float, default=0.5, metavar="SHARE",
                    help="... and for a size not listed, this share of the phase's records")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: 1 run, few records, small extra phases, docs untouched")
    ap.add_argument("--only", choices=("samsa", "kafka"),
                    help="benchmark Kafka alone, or Samsa alone (each of --processes)")
    # 1 and 2: the single process and the node of issue 51 side by side, ~1/3 more bench time
    ap.add_argument("--processes", default="1,2", type=_processes_list, metavar="N,...",
                    help="a Samsa column for each: 1 is `samsa serve`, N > 1 a node of N "
                         "processes (`samsa serve --processes N`, column \"samsa xN\")")
    ap.add_argument("--clients", default="java,rdkafka",
                    help="load generators of the produce/consume phases ('': skip them)")
    ap.add_argument("--no-docs", action="store_true", help="don't write docs/performance.md")
    ap.add_argument("--no-touch-memory", dest="touch_memory", action="store_false",
                    help="skip faulting in the machine's free memory before the runs "
                         "(see touch_free_memory)")
    ap.add_argument("--max-wait-quiet", type=float, default=60,
                    help="seconds to wait for other CPU load to settle before each broker run")
    ap.add_argument("--txn-records", type=int, default=500_000,
                    help="ProducerPerformance 100 B records in 100 ms transactions (0: skip)")
    ap.add_argument("--txn-seconds", type=float, default=20,
                    help="seconds of back-to-back one-record transactions (0: skip)")
    ap.add_argument("--latency-rate", type=int, default=1000,
                    help="records/s for the produce→consume latency phase (0: skip)")
    ap.add_argument("--latency-seconds", type=float, default=30,
                    help="length of the latency phase")
    ap.add_argument("--recovery-mib", type=int, default=1024,
                    help="MiB of log written before kill -9 + restart (0: skip)")
    ap.add_argument("--many-clients", type=int, default=200_000,
                    help=f"records per producer, {MANY_CLIENTS} producers and {MANY_CLIENTS} "
                         f"consumers on {MANY_PARTITIONS} partitions (0: skip)")
    # 5,000,000: at 1,000,000 (~1 s of reading) ConsumerPerformance's own JIT set its rate
    ap.add_argument("--rc-records", type=int, default=5_000_000,
                    help="100 B records in transactions (1 in 10 aborted) read back with "
                         "read_committed (0: skip)")
    ap.add_argument("--paced-partitions", default="100,500,2000",
                    help="paced many-partition produce: topic partition counts ('': skip)")
    ap.add_argument("--paced-rates", default="20000,100000",
                    help="... records/s in all (the issue's 10 %% and ~50 %% of capacity)")
    ap.add_argument("--paced-seconds", type=float, default=20, help="... seconds each")
    ap.add_argument("--paced-warmup-runs", type=int, default=5,
                    help="at most this many unmeasured paced runs before the paced rows, "
                         "until two in a row cost the broker alike a request (0: none)")
    ap.add_argument("--paced-consume", default="500=2000", metavar="PARTITIONS=RATE",
                    help="low-rate consume of many partitions alongside paced producers ('': "
                         "skip)")
    ap.add_argument("--tls-records", type=int, default=500_000,
                    help="1 KiB records produced and consumed over TLS (0: skip)")
    ap.add_argument("--lz4-records", type=int, default=1_000_000,
                    help="JSON-like 1 KiB records produced lz4-compressed (0: skip)")
    ap.add_argument("--txn-producers", type=int, default=16,
                    help="producers committing 10-record transactions in parallel for "
                         "--txn-seconds (0: skip)")
    ap.add_argument("--partitions", default="1000,10000",
                    help="scale steps: total partitions on the broker, comma-separated ('': skip)")
    args = ap.parse_args()
    if args.quick:
        args.runs, args.records, args.no_docs = 1, "100=50000,1024=10000", True
        args.producer_warmup = ""
        args.txn_records, args.txn_seconds = 20_000, 3
        args.latency_rate, args.latency_seconds, args.recovery_mib = 500, 5, 64
        args.partitions = "100"
        args.many_clients, args.rc_records = 6_400, 20_000
        args.paced_partitions, args.paced_rates, args.paced_seconds = "500", "2000", 5
        args.paced_warmup_runs = 2
        args.paced_consume = "100=500"
        args.tls_records, args.lz4_records, args.txn_producers = 20_000, 20_000, 4
    return args


def _processes_list(text: str) -> list[int]:
    counts = [int(x) for x in text.split(",") if x.strip()]
    if not counts or min(counts) < 1 or len(set(counts)) < len(counts):
        raise argparse.ArgumentTypeError(f"{text!r}: distinct process counts of 1 or more")
    return sorted(counts)


def make_plan(args: argparse.Namespace, kafka_lib: Path | None) -> Plan:
    sizes = {int(s): int(n) for s, n in (p.split("=") for p in args.records.split(","))}
    tools = kafka_lib if kafka_lib else TESTS_TOOLS_LIB
    if not any(tools.glob("kafka-tools-*.jar")):
        raise SystemExit(f"no Kafka tools in {tools}: run `make java-deps`")
    clients = tuple(c.strip() for c in args.clients.split(",") if c.strip())  # '': none
    # Kafka's first phase after a 200k warm-up still paid for C2 compilation: warm up longer.
    return Plan(sizes, clients, 20_000 if args.quick else 1_000_000, tools,
                txn_records=args.txn_records, txn_seconds=args.txn_seconds,
                latency_rate=args.latency_rate, latency_seconds=args.latency_seconds,
                recovery_mib=args.recovery_mib,
                many_clients=args.many_clients, rc_records=args.rc_records,
                partitions=tuple(int(x) for x in args.partitions.split(",") if x.strip()),
                producer_warmup={int(sz): int(n) for sz, n in (
                    p.split("=") for p in args.producer_warmup.split(",") if p.strip())},
                producer_warmup_share=args.producer_warmup_share,
                paced_partitions=tuple(int(x) for x in args.paced_partitions.split(",") if x),
                paced_rates=tuple(int(x) for x in args.paced_rates.split(",") if x),
                paced_seconds=args.paced_seconds, tls_records=args.tls_records,
                paced_warmup_runs=args.paced_warmup_runs,
                lz4_records=args.lz4_records, txn_producers=args.txn_producers,
                paced_consume=tuple(int(x) for x in args.paced_consume.split("=")) if
                args.paced_consume else (0, 0),  # type: ignore[arg-type]
                )  # fmt: skip


def main() -> int:
    args = parse_args()
    CACHE.mkdir(parents=True, exist_ok=True)
    (CACHE / "log4j2-tools.properties").write_text(LOG4J2.format(target="SYSTEM_ERR", level="warn"))
    kafka_lib, why = ensure_kafka_lib()  # the broker, and the load generators (kafka-tools)
    if args.only == "samsa":
        kafka_note = "not run (--only samsa)"
    elif kafka_lib is None:
        kafka_note = f"unavailable ({why})"
    else:
        version = jar_version(kafka_lib, "kafka_2.13")
        kafka_note = f"Apache Kafka {version} (Maven Central; KRaft, combined broker+controller)"
    plan = make_plan(args, kafka_lib)
    brokers = ["kafka"] if args.only in (None, "kafka") else []
    if args.only in (None, "samsa"):
        brokers += [samsa_column(n) for n in args.processes]
    if kafka_lib is None and "kafka" in brokers:
        print(f"Kafka: {kafka_note}")
        brokers.remove("kafka")
    res: dict[str, Results] = {b: {} for b in brokers}
    failures: Failures = []
    args.touched_gib = touch_free_memory() if args.touch_memory else 0.0
    for run in range(args.runs):
        for name in brokers:  # one after the other: never two brokers at once
            print(f"run {run + 1}/{args.runs}: {name}", flush=True)
            wait_for_quiet(args.max_wait_quiet)
            try:
                with running(name, kafka_lib if name == "kafka" else None) as broker:
                    bench_broker(broker, plan, res[name], failures)
                bench_item5(name, kafka_lib if name == "kafka" else None, plan, args,
                            res[name], failures)
            except (RuntimeError, KafkaException) as e:
                print(f"  {name} run aborted: {e}")
                failures.append({"broker": name, "phase": "run", "command": "", "error": str(e)})
        # The table of the runs done so far, after each: a bench stopped early (a full one
        # takes 45 minutes a run on a 2-core host) keeps what it measured.
        (CACHE / "last-run.json").write_text(json.dumps({"results": res, "failures": failures}))
        report(argparse.Namespace(**{**vars(args), "runs": run + 1}), plan, res, failures,
               kafka_note)
    return 0


def report(args: argparse.Namespace, plan: Plan, res: dict[str, Results],
           failures: Failures, kafka_note: str) -> None:  # fmt: skip
    env = "\n".join(environment(args, plan, kafka_note))
    table = render_table(plan, res, kafka_note)
    print(f"\n{env}\n\nKafka: {kafka_note}\n\n{table}\n")
    if failures:
        print(f"{len(failures)} phase(s) failed; details in {CACHE / 'last-run.json'}")
    if not args.no_docs:
        section = (f"{env}\n\n{table}\n\nMB = 2^20 bytes, as Kafka's tools print it.\n\n"
                   f"![Samsa/Kafka ratios](performance.svg)\n\n"
                   f"### Failures seen in this run\n\n{render_failures(failures)}")
        write_doc(section)
        PLOT.write_text(ratio_svg(ratio_rows(plan, res), f"Samsa / Kafka, {env.splitlines()[0]}"))


def _on_sigterm(_sig: int, _frame: object) -> None:
    raise SystemExit(143)  # unwinds through the finally blocks that stop the brokers


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        sys.exit(main())
    finally:
        cleanup()
