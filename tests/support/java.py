"""Run Kafka's Java clients and tools (fetched by `make java-deps` into .cache/) against Samsa.

    rc, out, err = run_java_tool("org.apache.kafka.tools.TopicCommand",
                                 ["--bootstrap-server", b.bootstrap, "--list"])
    classes = compile_java([Path("tests/java/src/ClientSmoke.java")], classpath="clients39")
    run_java_tool("ClientSmoke", [...], classpath="clients39", extra_classpath=[classes])

    app = JavaProcess("StreamsCount", [...], log_path=tmp_path / "app.log",
                      extra_classpath=[classes]).start()   # a long-running JVM
    app.kill9() / app.stop() / app.log_tail()

Class paths:
    kafka4    .cache/kafka-tools-4/lib/*      kafka-tools + kafka-clients 4.x and their deps
    clients39 .cache/kafka-clients-39/lib/*   kafka-clients 3.9.x alone
    connect4  .cache/kafka-connect-4/lib/*    Kafka Connect 4.x, connect-file, MirrorMaker 2
    kafka44   .cache/kafka-clients-44/lib/*   kafka-clients and kafka-streams 4.4.0
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

import pytest

from tests.support.broker import _PRCTL, _die_with_parent

REPO_ROOT = Path(__file__).resolve().parents[2]
CACHE_DIR = Path(os.environ.get("SAMSA_CACHE_DIR", REPO_ROOT / ".cache"))
CLASSPATHS = {
    "kafka4": CACHE_DIR / "kafka-tools-4" / "lib",
    "clients39": CACHE_DIR / "kafka-clients-39" / "lib",
    "connect4": CACHE_DIR / "kafka-connect-4" / "lib",
    "kafka44": CACHE_DIR / "kafka-clients-44" / "lib",
}
JAVA_SRC = REPO_ROOT / "tests" / "java" / "src"

# Quick start-up on a 2-core machine; the tools are short-lived.
JVM_ARGS = [
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Xshare:auto",
    "-Xmx512m",
    "-Djava.net.preferIPv4Stack=true",
    "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
    "-Dorg.slf4j.simpleLogger.logFile=System.err",
    "-Dorg.slf4j.simpleLogger.showDateTime=true",
]


class JavaResult(NamedTuple):
    returncode: int
    stdout: str
    stderr: str
    timed_out: bool = False
    command: str = ""

    def describe(self) -> str:
        state = "TIMED OUT" if self.timed_out else f"exit {self.returncode}"
        return (
            f"$ {self.command}\n[{state}]\n--- stdout ---\n{_clip(self.stdout)}\n"
            f"--- stderr ---\n{_clip(self.stderr)}"
        )

    def check(self) -> JavaResult:
        """Fail the test (with all output) unless the program exited 0."""
        if self.timed_out or self.returncode != 0:
            pytest.fail(self.describe(), pytrace=False)
        return self


def _clip(text: str, limit: int = 8000) -> str:
    if len(text) <= limit:
        return text
    return f"...[{len(text) - limit} chars cut]...\n" + text[-limit:]


def java_executable() -> str:
    exe = shutil.which("java")
    if exe is None:
        pytest.skip("java is not installed (needs JDK 17+: apt-get install default-jdk)")
    return exe


def javac_executable() -> str:
    exe = shutil.which("javac")
    if exe is None:
        pytest.skip("javac is not installed (needs JDK 17+: apt-get install default-jdk)")
    return exe


def classpath_dir(classpath: str) -> Path:
    try:
        lib = CLASSPATHS[classpath]
    except KeyError:
        raise ValueError(f"unknown classpath {classpath!r}; one of {sorted(CLASSPATHS)}") from None
    if not lib.is_dir() or not any(lib.glob("*.jar")):
        # Not a skip: `make test` fetches these, so their absence is a broken set-up.
        pytest.fail(f"{lib} has no jars: run `make java-deps` first", pytrace=False)
    return lib


def jar_version(classpath: str, artifact: str = "kafka-clients") -> str:
    for jar in classpath_dir(classpath).glob(f"{artifact}-*.jar"):
        return jar.name[len(artifact) + 1 : -len(".jar")]
    raise FileNotFoundError(f"{artifact} jar not in {classpath}")


def _cp(classpath: str, extra: Iterable[os.PathLike[str] | str] = ()) -> str:
    parts = [str(p) for p in extra] + [str(classpath_dir(classpath) / "*")]
    return os.pathsep.join(parts)


def run_java_tool(
    main_class: str,
    args: Sequence[str] = (),
    classpath: str = "kafka4",
    timeout: float = 120,
    *,
    extra_classpath: Iterable[os.PathLike[str] | str] = (),
    jvm_args: Sequence[str] = (),
    input: str | None = None,
) -> JavaResult:
    """Run `java -cp <extra>:<cache lib>/* main_class args...`; never raises on failure.

    A run past `timeout` is killed and returned with timed_out=True (returncode -9).
    """
    java = java_executable()
    cmd = [java, *JVM_ARGS, *jvm_args, "-cp", _cp(classpath, extra_classpath), main_class, *args]
    shown = " ".join([main_class, *args])
    try:
        proc = subprocess.run(
            cmd,
            input=input,
            stdin=None if input is not None else subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=REPO_ROOT,
        )
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else e.stdout or ""
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else e.stderr or ""
        return JavaResult(-9, out, err, True, shown)
    return JavaResult(proc.returncode, proc.stdout, proc.stderr, False, shown)


class JavaProcess:
    """A long-running JVM (e.g. a Kafka Streams application) whose stdout and stderr go to
    `log_path`, appended across starts. It dies with the test process (PR_SET_PDEATHSIG)."""

    def __init__(
        self,
        main_class: str,
        args: Sequence[str],
        *,
        log_path: os.PathLike[str] | str,
        classpath: str = "kafka4",
        extra_classpath: Iterable[os.PathLike[str] | str] = (),
        jvm_args: Sequence[str] = (),
        name: str | None = None,
    ) -> None:
        self.cmd = [java_executable(), *JVM_ARGS, *jvm_args,
                    "-cp", _cp(classpath, extra_classpath), main_class, *args]
        self.shown = " ".join([main_class, *args])
        self.log_path = Path(log_path)
        self.name = name or main_class
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> JavaProcess:
        if self.is_running():
            raise RuntimeError(f"{self.name} is already running (pid {self.proc.pid})")
        self.starts += 1
        with open(self.log_path, "ab") as log:
            log.write(f"\n===== start #{self.starts} at {time.strftime('%H:%M:%S')}: "
                      f"{shlex.join(self.cmd)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                self.cmd, cwd=REPO_ROOT, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True,
                preexec_fn=_die_with_parent if _PRCTL is not None else None,
            )
        return self

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill9(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()

    def stop(self, timeout: float = 40) -> int | None:
        """SIGTERM, then SIGKILL after `timeout` s. The exit code (None: killed on a hang,
        after SIGQUIT had the JVM print its threads' stacks to the log: `log_tail` shows them)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.send_signal(signal.SIGQUIT)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.proc.wait(5)  # the dump is written at once; the JVM goes on
                self.kill9()
                return None
        return self.proc.returncode

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 80) -> str:
        """The log's last lines; after a hang (see `stop`) from the thread dump on, which is
        what says where the JVM was stuck."""
        text = self.log_text().splitlines()
        dump = max((i for i, line in enumerate(text) if line.startswith("Full thread dump")),
                   default=None)
        if dump is not None and not any(line.startswith("===== start #")
                                        for line in text[dump:]):
            lines = max(lines, min(len(text) - dump + 20, 1500))
        return (f"----- {self.name}: last {min(lines, len(text))} lines of {self.log_path} "
                f"-----\n" + "\n".join(text[-lines:]))


def compile_java(sources: Sequence[os.PathLike[str] | str], classpath: str = "clients39") -> Path:
    """javac the sources against a cached class path; returns the class output directory.

    Output lives in .cache/java-classes/<classpath>-<hash of sources and jars>, so it is
    rebuilt only when a source or the jar set changes.
    """
    javac = javac_executable()
    lib = classpath_dir(classpath)
    h = hashlib.sha256()
    for src in sorted(map(Path, sources)):
        h.update(src.name.encode())
        h.update(src.read_bytes())
    for jar in sorted(lib.glob("*.jar")):
        h.update(jar.name.encode())
    out = CACHE_DIR / "java-classes" / f"{classpath}-{h.hexdigest()[:16]}"
    if (out / ".ok").exists():
        return out
    tmp = out.with_name(f"{out.name}.tmp{os.getpid()}.{time.monotonic_ns()}")
    tmp.mkdir(parents=True)
    proc = subprocess.run(
        [javac, "-Xlint:deprecation", "-d", str(tmp), "-cp", _cp(classpath), *map(str, sources)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if proc.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        pytest.fail(
            f"javac against {classpath} failed:\n{proc.stdout}\n{proc.stderr}", pytrace=False
        )
    (tmp / ".ok").touch()
    try:
        tmp.rename(out)
    except OSError:  # another process won the race
        shutil.rmtree(tmp, ignore_errors=True)
    return out
