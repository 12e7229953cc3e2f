"""docker-compose.yml and Dockerfile at the repository root: ZooKeeper, brokers 1 and 2, and
samsa-3, a node of two processes (brokers 3 and 4).

- the file's shape, and that each broker's command is one `samsa serve` understands: always;
- `docker compose config` (the CLI plugin) and Debian's standalone `docker-compose config`
  validate the file, each where it is installed;
- the cluster for real, on a Docker engine (tests/support/docker_env.py starts Debian's dockerd
  when none runs, and builds stand-ins of python:3.11-slim and zookeeper:3.8 where no registry
  serves them): `up --build` with the standalone docker-compose, every Python client through
  the published 127.0.0.1 ports to a topic led by all four processes, a broker killed (`docker
  kill`) and restarted, then the node of two processes killed whole, with nothing acknowledged
  lost, `down -v`; and the same file through testcontainers' DockerCompose
  (`docker compose`). These skip only where no engine can run, and say why.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from samsa.broker import cli
from samsa.broker.cluster.local_cluster import port_is_free
from samsa.broker.node.supervisor import node_processes
from tests.support import docker_env
from tests.support.broker import REPO_ROOT

COMPOSE_FILE = REPO_ROOT / "docker-compose.yml"
BROKER_SERVICES = ("samsa-1", "samsa-2", "samsa-3")
# {service: {broker id: the port it listens on, advertises and publishes}}; samsa-3 is a node
# of two processes.
SERVICE_BROKERS = {"samsa-1": {1: 19092}, "samsa-2": {2: 19093}, "samsa-3": {3: 19094, 4: 19095}}
SERVICE_OF = {b: name for name, brokers in SERVICE_BROKERS.items() for b in brokers}
BROKER_IDS = set(SERVICE_OF)
HOST_PORTS = tuple(p for brokers in SERVICE_BROKERS.values() for p in brokers.values())
SERVICES = ("zookeeper", *BROKER_SERVICES)
# One worker at a time changes the host's network (tests/support/xdist_units.py): the
# engine's bridges and iptables rules, and the fixed host ports above.
pytestmark = pytest.mark.xdist_group("host-network")


def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE_FILE.read_text())


def serve_args(service: dict[str, Any]) -> list[str]:
    command = [str(a) for a in service["command"]]
    assert command[0] == "serve", command
    return command


# ---------------------------------------------------------------- the file itself
def test_compose_services_and_broker_commands() -> None:
    doc = compose()
    services = doc["services"]
    assert set(services) == {"zookeeper", *BROKER_SERVICES}
    assert services["zookeeper"]["image"] == "zookeeper:3.8"
    assert "healthcheck" in services["zookeeper"]
    # No container has a way out: ZooKeeper only on the internal network, the brokers also on
    # a bridge without masquerading (for their published ports).
    networks = doc["networks"]
    assert networks["cluster"]["internal"] is True
    assert networks["clients"]["driver_opts"] == {
        "com.docker.network.bridge.enable_ip_masquerade": "false"}
    assert services["zookeeper"]["networks"] == ["cluster"]
    assert "ports" not in services["zookeeper"]
    volumes: set[str] = set()
    for name, brokers in SERVICE_BROKERS.items():
        svc = services[name]
        assert svc["build"] == "."
        assert svc["depends_on"] == {"zookeeper": {"condition": "service_healthy"}}
        assert svc["networks"] == ["cluster", "clients"]
        args = cli.make_parser().parse_args(serve_args(svc))
        props = dict((p, v) for p, v in args.overrides if p is not None)
        sets = dict(v.split("=", 1) for p, v in args.overrides if p is None)
        assert props["zookeeper.connect"] == "zookeeper:2181/samsa"
        assert props["node.id"] == str(min(brokers))
        assert props["log.dirs"] == "/var/lib/samsa"
        assert args.processes == len(brokers)
        assert sets["broker.rack"] == name  # each service a rack of its own
        # Listen, advertise and publish the same port, advertised under the service name,
        # published on the host's loopback only (a node's processes: the ports after it).
        host_port = brokers[min(brokers)]
        assert props["listeners"] == f"PLAINTEXT://0.0.0.0:{host_port}"
        assert sets["advertised.listeners"] == f"PLAINTEXT://{name}:{host_port}"
        assert svc["ports"] == [f"127.0.0.1:{p}:{p}" for p in brokers.values()]
        assert all(str(p) in " ".join(svc["healthcheck"]["test"]) for p in brokers.values())
        (volume,) = svc["volumes"]
        assert volume.endswith(":/var/lib/samsa")
        volumes.add(volume.split(":")[0])
    assert len(volumes) == 3 and volumes <= set(doc["volumes"])


def test_dockerfile_installs_the_package() -> None:
    text = (REPO_ROOT / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11-slim$", text, re.M)
    assert "pip install /src" in text
    # docker/entrypoint.py: KAFKA_CFG_* variables to `samsa serve` flags, then exec samsa
    assert re.search(r'^ENTRYPOINT \["python", "/usr/local/lib/samsa-image/entrypoint.py"\]$',
                     text, re.M)
    assert "COPY docker/entrypoint.py /usr/local/lib/samsa-image/entrypoint.py" in text
    copied = set(re.findall(r"^COPY (\w+) /src/\1$", text, re.M))
    # The wheel holds samsa/ and the folders pyproject's package-dir maps under it (setup.py
    # lists their packages, so it is copied too).
    package_dir = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-dir"]
    packages = set(package_dir.values())
    assert "samsa" in packages and copied == packages  # every package in the wheel is in the image
    assert re.search(r"^COPY pyproject\.toml setup\.py README\.md /src/$", text, re.M)
    ignore = (REPO_ROOT / ".dockerignore").read_text().split()
    assert {f"!{p}" for p in packages | {"setup.py"}} <= set(ignore)


@pytest.mark.parametrize("name", BROKER_SERVICES)
def test_compose_broker_config_is_accepted(name: str) -> None:
    args = cli.make_parser().parse_args(serve_args(compose()["services"][name]))
    cfg = cli.build_config(args)
    assert cfg.advertised_listener.host == name
    # What each process of the service runs (the node's supervisor, for samsa-3).
    processes = node_processes(None, cli._overrides(args), args.processes, ["samsa", "serve"])
    seen = {}
    for p in processes:
        process = cli.build_config(cli.make_parser().parse_args(p.command[1:]))
        seen[process.broker_id] = (process.listen_port, process.advertised_listener.host,
                                   process.advertised_listener.port, process["broker.rack"])
    assert seen == {b: (port, name, port, name) for b, port in SERVICE_BROKERS[name].items()}




# ---------------------------------------------------------------- docker compose config
def compose_clients() -> dict[str, list[str] | None]:
    """The compose clients: the CLI plugin, Debian's standalone one; None where absent."""
    return {"docker compose": ["docker", "compose"] if shutil.which("docker") else None,
            "docker-compose": ["docker-compose"] if shutil.which("docker-compose") else None}


@pytest.mark.parametrize("client", ["docker compose", "docker-compose"])
def test_docker_compose_config_validates(client: str) -> None:
    cmd = compose_clients()[client]
    if cmd is None:
        pytest.skip(f"{client} is not installed (`make docker-deps` installs it)")
    # The plugin may come from PyPI (docker_env.compose_plugin_env); no engine is needed.
    env = {**os.environ, **(docker_env.compose_plugin_env() if client == "docker compose"
                            else {})}
    r = subprocess.run([*cmd, "-f", str(COMPOSE_FILE), "config", "--quiet"], cwd=REPO_ROOT,
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, f"{client} config:\n{r.stdout}\n{r.stderr}"


# ---------------------------------------------------------------- the cluster, for real
@pytest.fixture(scope="module")
def docker() -> Iterator[dict[str, str]]:
    """A Docker engine (ours, stopped afterwards, when none was running), `docker compose`,
    and the images the files name; yields the environment docker commands run with."""
    try:
        engine = docker_env.Engine().start()
    except docker_env.DockerUnavailable as e:
        pytest.skip(f"the compose cluster cannot run on this machine: {e}")
    try:
        env = {**docker_env.compose_plugin_env(), "TESTCONTAINERS_RYUK_DISABLED": "true"}
        t0 = time.monotonic()
        images = docker_env.ensure_images()
        docker_env.log(f"images {images} ready in {time.monotonic() - t0:.0f} s")
        # Another test session on this machine (sharing the engine) may be running its compose
        # cluster on these fixed host ports: wait for it to come down before calling them taken
        ports_deadline = time.monotonic() + 300
        while (busy := [p for p in HOST_PORTS if not port_is_free("127.0.0.1", p)]) \
                and time.monotonic() < ports_deadline:
            time.sleep(2)
        assert not busy, f"host ports {busy} are taken (another compose cluster running?)"
        yield env
    finally:
        engine.stop()


def hosts_file(tmp_path: Path) -> Path | None:
    """None when the host already resolves samsa-1..3 to itself (as docker-compose.yml asks);
    else a copy of /etc/hosts that does, for the clients' own mount namespace."""
    import socket

    try:
        if all(socket.gethostbyname(n).startswith("127.") for n in BROKER_SERVICES):
            return None
    except OSError:
        pass
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("the host must resolve samsa-1..3 to 127.0.0.1 (docker-compose.yml): "
                    "add them to /etc/hosts, or run as root (a mount namespace of the "
                    "clients' own with such a hosts file)")
    path = tmp_path / "hosts"
    path.write_text(Path("/etc/hosts").read_text()
                    + f"\n127.0.0.1 {' '.join(BROKER_SERVICES)}\n")
    return path


def clients(hosts: Path | None, *args: str) -> Any:
    """One step of tests/cluster/compose_clients.py on the host; its JSON output."""
    cmd = [sys.executable, "-m", "tests.cluster.compose_clients", *args]
    if hosts is not None:  # /etc/hosts as the file above, for this process alone
        cmd = ["unshare", "--mount", "--", "sh", "-c", 'mount --bind "$0" /etc/hosts && exec "$@"',
               str(hosts), *cmd]
    r = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=180,
                       env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert r.returncode == 0, f"compose_clients {args}:\n{r.stdout[-3000:]}\n{r.stderr[-5000:]}"
    return json.loads(r.stdout.splitlines()[-1])


class Compose:
    """`docker-compose` / `docker compose` on the shipped file under a project of its own."""

    def __init__(self, client: list[str], env: dict[str, str]) -> None:
        self.project = f"samsa-test-{os.getpid()}"
        self.cmd = [*client, "-p", self.project, "-f", str(COMPOSE_FILE)]
        self.env = {**os.environ, **env}

    def __call__(self, *args: str, timeout: float = 300) -> str:
        r = subprocess.run([*self.cmd, *args], cwd=REPO_ROOT, capture_output=True, text=True,
                           timeout=timeout, env=self.env)
        assert r.returncode == 0, f"{args}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
        return r.stdout

    def container(self, service: str) -> str:
        return self("ps", "-q", service).strip()

    def health(self, service: str) -> str:
        r = subprocess.run(["docker", "inspect", "--format", "{{.State.Health.Status}}",
                            self.container(service)], capture_output=True, text=True,
                           timeout=60)
        return r.stdout.strip()

    def wait_healthy(self, *services: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while (sick := [s for s in services if self.health(s) != "healthy"]):
            assert time.monotonic() < deadline, (f"not healthy after {timeout:.0f} s: {sick}\n"
                                                 + self("logs", "--tail", "40", *sick))
            time.sleep(1)

    def volumes(self) -> list[str]:
        r = subprocess.run(["docker", "volume", "ls", "-q", "--filter",
                            f"label=com.docker.compose.project={self.project}"],
                           capture_output=True, text=True, timeout=60, check=True)
        return r.stdout.split()


def wait_leaders(hosts: Path | None, topic: str, *, alive: set[int], in_sync: bool = False,
                 timeout: float = 90) -> dict[str, Any]:
    """Until every partition of topic has a leader among `alive` (and, if in_sync, every
    replica in its ISR)."""
    deadline = time.monotonic() + timeout
    while True:
        parts = clients(hosts, "partitions", topic)
        if all(p["leader"] in alive and (not in_sync or p["isr"] == sorted(p["replicas"]))
               for p in parts.values()):
            return parts  # type: ignore[no-any-return]
        assert time.monotonic() < deadline, f"partitions after {timeout:.0f} s: {parts}"
        time.sleep(1)


# The first run on a machine builds the images in the fixture (~5 min on 2 cores, see
# tests/support/docker_env.py); later runs take ~70 s and ~20 s.
@pytest.mark.timeout(1200)
def test_compose_cluster_clients_and_broker_kill(docker: dict[str, str], tmp_path: Path) -> None:
    """Debian's docker-compose (else the plugin): up --build, every client produces (acks=all)
    and consumes through the published ports, a partition leader is killed, more is produced,
    it restarts and catches up, the node of two processes is killed whole, and every client
    still reads every acknowledged record; down -v leaves no volume behind."""
    client = compose_clients()["docker-compose"] or ["docker", "compose"]
    hosts = hosts_file(tmp_path)
    compose = Compose(client, docker)
    t0 = time.monotonic()
    try:
        compose("up", "-d", "--build", timeout=900)
        compose.wait_healthy(*SERVICES)
        docker_env.log(f"{' '.join(client)} up, all healthy in {time.monotonic() - t0:.0f} s")
        topic = "compose-kill"
        clients(hosts, "create", topic)
        parts = wait_leaders(hosts, topic, alive=BROKER_IDS, in_sync=True)
        # Each service is a rack: every partition has a replica on each, and both processes
        # of samsa-3 lead partitions.
        for p in parts.values():
            assert sorted(SERVICE_OF[b] for b in p["replicas"]) == list(BROKER_SERVICES), parts
        assert {p["leader"] for p in parts.values()} == BROKER_IDS, parts
        acked = clients(hosts, "produce", topic, "before", "100")
        assert {p for _, p, _, _ in acked} == set(range(len(parts)))  # to every process
        # Kill the leader of partition 0 (no clean shutdown: SIGKILL to the container).
        victim = SERVICE_OF[parts["0"]["leader"]]
        subprocess.run(["docker", "kill", compose.container(victim)], check=True,
                       capture_output=True, timeout=60)
        wait_leaders(hosts, topic, alive=BROKER_IDS - set(SERVICE_BROKERS[victim]))
        acked += clients(hosts, "produce", topic, "while-down", "100")
        compose("start", victim)
        compose.wait_healthy(victim)
        wait_leaders(hosts, topic, alive=BROKER_IDS, in_sync=True)
        # The restarted broker now holds everything: kill the node of two processes whole
        # (another service if that was the first), read from the other two services.
        second = "samsa-3" if victim != "samsa-3" else "samsa-2"
        subprocess.run(["docker", "kill", compose.container(second)], check=True,
                       capture_output=True, timeout=60)
        wait_leaders(hosts, topic, alive=BROKER_IDS - set(SERVICE_BROKERS[second]))
        read = clients(hosts, "consume", topic)
        want = {(p, o, v) for _, p, o, v in acked}
        assert len(want) == len(acked) == 2 * 3 * 100
        for name, records in read.items():
            got = {(p, o, v) for p, o, v in records}
            assert want <= got, f"{name} lost {sorted(want - got)[:10]} of {len(want)}"
        docker_env.log(f"kill/restart cycle done at {time.monotonic() - t0:.0f} s")
    finally:
        compose("down", "-v", timeout=300)
    assert compose.volumes() == []


@pytest.mark.timeout(1200)
def test_compose_cluster_with_testcontainers(docker: dict[str, str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from testcontainers.compose import DockerCompose

    for k, v in docker.items():
        monkeypatch.setenv(k, v)
    # Own project name: `down --volumes` afterwards must not touch a user's own cluster.
    monkeypatch.setenv("COMPOSE_PROJECT_NAME", f"samsa-test-tc-{os.getpid()}")
    with DockerCompose(REPO_ROOT, compose_file_name="docker-compose.yml",
                       build=True, wait=True) as cluster:
        assert {c.Service for c in cluster.get_containers()} == set(SERVICES)
        # Registrations, read inside the compose network with the image's own kazoo.
        script = (
            "import time\n"
            "from kazoo.client import KazooClient\n"
            "zk = KazooClient(hosts='zookeeper:2181/samsa'); zk.start(timeout=30)\n"
            "deadline = time.time() + 60\n"
            "while time.time() < deadline:\n"
            "    ids = zk.get_children('/brokers/ids') if zk.exists('/brokers/ids') else []\n"
            "    if len(ids) == 4: break\n"
            "    time.sleep(0.5)\n"
            "print(' '.join(sorted(ids)))\n"
        )
        out, err, rc = cluster.exec_in_container(["python", "-c", script], "samsa-1")
        assert rc == 0 and out.split() == ["1", "2", "3", "4"], (out, err, cluster.get_logs())

        from confluent_kafka.admin import AdminClient

        # From the host, each published port answers on its own (ApiVersions + Metadata on
        # the bootstrap connection) and advertises its service name.
        for broker_id, port in enumerate(HOST_PORTS, start=1):
            service = SERVICE_OF[broker_id]
            assert cluster.get_service_port(service, port) == port
            md = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"}).list_topics(timeout=30)
            assert (md.brokers[broker_id].host, md.brokers[broker_id].port) == (service, port)
