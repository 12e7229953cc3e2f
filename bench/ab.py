"""What the A/B scripts (consume_ab.py, produce_ab.py) share: a variant to measure (a name, a
source tree, broker settings) with the figures of its runs."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run as bench  # noqa: E402  (bench/ is a directory of scripts, not a package)


@dataclass
class Variant:
    name: str
    tree: Path
    settings: list[str]
    kafka: bool = False  # Apache Kafka instead of Samsa (settings: server.properties lines)
    python: str = sys.executable  # the interpreter that runs the broker
    mbps: list[float] = field(default_factory=list)
    p99: list[float] = field(default_factory=list)
    cpu_per_gb: list[float] = field(default_factory=list)


def parse_variant(spec: str) -> Variant:
    """NAME[@TREE][:PYTHON]=K=V,K=V (settings may be empty; PYTHON: an interpreter with
    samsa's dependencies, e.g. another venv's bin/python, to compare interpreters)."""
    head, _, settings = spec.partition("=")
    head, _, python = head.partition(":")
    name, _, tree = head.partition("@")
    return Variant(name, Path(tree) if tree else bench.REPO,
                   [s for s in settings.split(",") if s], python=python or sys.executable)


@contextlib.contextmanager
def running(v: Variant, prefix: str) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """The variant's broker, one of it, started in a new temp dir and answering: (process,
    bootstrap); stopped and its dir removed afterwards."""
    work = Path(tempfile.mkdtemp(prefix=f"{prefix}-{v.name}-"))
    proc: subprocess.Popen[bytes] | None = None
    try:
        if v.kafka:
            bench.write_log4j_configs(work)
            broker = bench.start_kafka(bench.KAFKA_DIR / "lib", work, tuple(v.settings))
            proc = broker.proc
            yield proc, broker.bootstrap
            return
        port = bench.free_port()
        cmd = [v.python, "-m", "samsa", "serve", "--listen", f"127.0.0.1:{port}",
               "--data-dir", str(work / "data")]
        for s in v.settings:
            cmd += ["--set", s]
        log = work / "samsa.log"
        proc = bench.spawn(cmd, log, cwd=v.tree)  # samsa is imported from the tree's samsa/
        bench.wait_first_answer(proc, port, time.monotonic(), log)
        yield proc, f"127.0.0.1:{port}"
    finally:
        if proc is not None:
            bench.stop(proc)
        shutil.rmtree(work, ignore_errors=True)
