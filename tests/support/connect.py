"""A Kafka Connect 4.x worker in distributed mode (ConnectDistributed) against Samsa.

    worker = ConnectWorker(tmp_path, bootstrap, group="connect-x").start()
    worker.wait_ready()                                   # REST up and the worker in its group
    worker.create_connector("src", {"connector.class": FILE_SOURCE, ...})
    worker.wait_running("src")                            # connector and every task RUNNING
    worker.kill9(); worker.start()                        # same group, topics and REST port
    worker.stop()

Its config, offset and status topics are created by the worker's own admin client on first
start (compacted, replication factor 1). The jars are .cache/kafka-connect-4/lib (`make
java-deps`); FileStreamSource/Sink (connect-file) are on the class path, found through their
ServiceLoader manifests (plugin.discovery=service_load: no scan of the class path).
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.support.broker import free_port
from tests.support.java import JAVA_SRC, JavaProcess, compile_java

FILE_SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
FILE_SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"

# A JVM of its own may need more than the tools' 512 MiB for Connect's REST server and tasks;
# its log at info says what its herders, tasks and clients did.
CONNECT_JVM_ARGS = ["-Xmx768m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=info"]

# The transaction timeout of exactly-once source tasks' producers. A kill -9 between a task's
# offsets write and its commit leaves a transaction open on the offsets topic, and a restarted
# worker reads that topic to its end before its tasks start (Connect's KafkaBasedLog does so
# for read_committed): it waits for the coordinator to abort the transaction on its timeout,
# the producer's default 60 s (66 s in a MirrorMaker run). Tasks that commit at every poll or
# every second need far less.
EOS_TASK_TRANSACTION_TIMEOUT_MS = 10_000


def connect_process(main_class: str, args: Sequence[str], **kwargs: Any) -> JavaProcess:
    """A JVM (CONNECT_JVM_ARGS) running a Connect entry point whose REST server has one
    shutdown hook, Connect's own: with Jetty's beside it, SIGTERM now and then hangs the JVM for
    ever in Connect's RestServer.stop (OneRestShutdownHook.java says how), a race in the client
    that says nothing about the broker."""
    launcher = compile_java([JAVA_SRC / "OneRestShutdownHook.java"], classpath="connect4")
    return JavaProcess("OneRestShutdownHook", [main_class, *args], classpath="connect4",
                       extra_classpath=[launcher], jvm_args=CONNECT_JVM_ARGS, **kwargs)


def write_properties(path: Path, props: Mapping[str, object]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


class ConnectWorker:
    def __init__(
        self,
        workdir: Path,
        bootstrap: str,
        *,
        group: str,
        extra: Mapping[str, object] | None = None,
        name: str = "connect",
    ) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.group = group
        props: dict[str, object] = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "key.converter.schemas.enable": "false",
            "value.converter.schemas.enable": "false",
            "config.storage.topic": f"{group}-configs",
            "offset.storage.topic": f"{group}-offsets",
            "status.storage.topic": f"{group}-status",
            "config.storage.replication.factor": 1,
            "offset.storage.replication.factor": 1,
            "status.storage.replication.factor": 1,
            "offset.flush.interval.ms": 1000,
            # A worker killed with -9 is replaced by one with the same REST address: let the
            # group drop the dead member soon (group.min.session.timeout.ms is 6 s) and hand
            # its connectors and tasks out again at once instead of after Connect's default
            # 5 minute grace period.
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 2000,
            "scheduled.rebalance.max.delay.ms": 0,
            "listeners": self.url,
            "plugin.discovery": "service_load",
        }
        props.update(extra or {})
        self.props_path = write_properties(workdir / f"{name}.properties", props)
        self.proc = connect_process(
            "org.apache.kafka.connect.cli.ConnectDistributed", [str(self.props_path)],
            log_path=workdir / f"{name}.log", name=name,
        )

    # ------------------------------------------------------------------ process
    def start(self) -> ConnectWorker:
        self.proc.start()
        return self

    def kill9(self) -> None:
        self.proc.kill9()

    def stop(self) -> int | None:
        return self.proc.stop()

    def log_tail(self, lines: int = 60) -> str:
        return self.proc.log_tail(lines)

    # ------------------------------------------------------------------ REST
    def request(self, method: str, path: str, body: object | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            self.url + path, data=data, method=method,
            headers={"Content-Type": "application/json", "Accept": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=30) as resp:
            raw = resp.read()
        return json.loads(raw) if raw else None

    def _fail(self, what: str) -> AssertionError:
        return AssertionError(f"{what}\n{self.log_tail()}")

    def wait_ready(self, timeout: float = 90) -> None:
        """Until the REST server answers and the worker has joined its group (GET
        /connectors answers only once the herder has read its config topic)."""
        deadline = time.monotonic() + timeout
        while True:
            if not self.proc.is_running():
                raise self._fail(f"the Connect worker exited ({self.proc.proc.returncode})")
            try:
                self.request("GET", "/connectors")
                return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if time.monotonic() > deadline:
                raise self._fail(f"the Connect worker was not ready within {timeout} s")
            time.sleep(0.5)

    def create_connector(self, name: str, config: Mapping[str, str]) -> Any:
        try:
            return self.request("PUT", f"/connectors/{name}/config", dict(config))
        except urllib.error.HTTPError as exc:  # Connect explains a 400/409 in the body
            raise self._fail(f"PUT /connectors/{name}/config: HTTP {exc.code} "
                             f"{exc.read().decode(errors='replace')}") from exc

    def status(self, name: str) -> Any:
        return self.request("GET", f"/connectors/{name}/status")

    def wait_running(self, name: str, timeout: float = 60) -> Any:
        """Until the connector and at least one task report RUNNING (a FAILED one fails)."""
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            try:
                last = self.status(name)
            except urllib.error.HTTPError as exc:  # 404 until the config is read back
                last = f"HTTP {exc.code}"
            except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
                last = repr(exc)
            if isinstance(last, dict):
                states = [last["connector"]["state"]] + [t["state"] for t in last["tasks"]]
                if "FAILED" in states:
                    raise self._fail(f"connector {name} failed: {json.dumps(last, indent=1)}")
                if last["tasks"] and set(states) == {"RUNNING"}:
                    return last
            time.sleep(0.5)
        raise self._fail(f"connector {name} not RUNNING within {timeout} s: {last}")
