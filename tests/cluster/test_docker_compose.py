"""docker-compose.yml and Dockerfile at the repository root: ZooKeeper and three brokers.

- the file's shape, and that each broker's command is one `samsa serve` understands: always;
- `docker compose config` (or the older standalone `docker-compose config`) validates the
  file: where such a client is installed;
- the whole cluster up through testcontainers: only where a Docker engine answers (our
  machines and CI have the client but no engine, so there it skips and says why).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from typing import Any

import pytest
import yaml

from samsa.broker import cli
from samsa.broker.local_cluster import port_is_free
from tests.support.broker import REPO_ROOT

COMPOSE_FILE = REPO_ROOT / "docker-compose.yml"
BROKER_SERVICES = ("samsa-1", "samsa-2", "samsa-3")
HOST_PORTS = (19092, 19093, 19094)


def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE_FILE.read_text())


def serve_args(service: dict[str, Any]) -> list[str]:
    command = [str(a) for a in service["command"]]
    assert command[0] == "serve", command
    return command


def compose_client() -> list[str] | None:
    """`docker compose` (the CLI plugin), else the standalone `docker-compose`, else None."""
    if shutil.which("docker"):
        r = subprocess.run(["docker", "compose", "version"], capture_output=True, timeout=60)
        if r.returncode == 0:
            return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    return None


def docker_engine_error() -> str | None:
    """None when a Docker engine answers a ping, found the way testcontainers finds it
    (DOCKER_HOST, ~/.testcontainers.properties, the docker context); else why not."""
    try:
        from testcontainers.core.docker_client import DockerClient

        DockerClient(timeout=10).client.ping()
    except Exception as e:  # DockerException, connection errors, timeouts
        return f"{type(e).__name__}: {e}"
    return None


# ---------------------------------------------------------------- the file itself
def test_compose_services_and_broker_commands() -> None:
    doc = compose()
    services = doc["services"]
    assert set(services) == {"zookeeper", *BROKER_SERVICES}
    assert services["zookeeper"]["image"] == "zookeeper:3.8"
    assert "healthcheck" in services["zookeeper"]
    volumes: set[str] = set()
    for name, host_port in zip(BROKER_SERVICES, HOST_PORTS, strict=True):
        svc = services[name]
        assert svc["build"] == "."
        assert svc["depends_on"] == {"zookeeper": {"condition": "service_healthy"}}
        args = cli.make_parser().parse_args(serve_args(svc))
        props = dict((p, v) for p, v in args.overrides if p is not None)
        sets = dict(v.split("=", 1) for p, v in args.overrides if p is None)
        assert props["zookeeper.connect"] == "zookeeper:2181/samsa"
        assert props["node.id"] == name.rsplit("-", 1)[1]
        assert props["log.dirs"] == "/var/lib/samsa"
        # Listen, advertise and publish the same port, advertised under the service name,
        # published on the host's loopback only.
        assert props["listeners"] == f"PLAINTEXT://0.0.0.0:{host_port}"
        assert sets["advertised.listeners"] == f"PLAINTEXT://{name}:{host_port}"
        assert svc["ports"] == [f"127.0.0.1:{host_port}:{host_port}"]
        assert str(host_port) in " ".join(svc["healthcheck"]["test"])
        (volume,) = svc["volumes"]
        assert volume.endswith(":/var/lib/samsa")
        volumes.add(volume.split(":")[0])
    assert len(volumes) == 3 and volumes <= set(doc["volumes"])


def test_dockerfile_installs_the_package() -> None:
    text = (REPO_ROOT / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11-slim$", text, re.M)
    assert "pip install /src" in text
    assert re.search(r'^ENTRYPOINT \["samsa"\]$', text, re.M)
    copied = set(re.findall(r"^COPY (\w+) /src/\1$", text, re.M))
    # The wheel holds samsa/ and the folders its links point to (pyproject's packages.find).
    linked = {p.resolve().name for p in (REPO_ROOT / "samsa").iterdir() if p.is_symlink()}
    packages = {"samsa"} | linked
    assert linked and copied == packages  # every package in the wheel is in the image
    ignore = (REPO_ROOT / ".dockerignore").read_text().split()
    assert {f"!{p}" for p in packages} <= set(ignore)


@pytest.mark.parametrize("name", BROKER_SERVICES)
def test_compose_broker_config_is_accepted(name: str) -> None:
    args = cli.make_parser().parse_args(serve_args(compose()["services"][name]))
    cfg = cli.build_config(args)
    assert cfg.advertised_listener.host == name


# ---------------------------------------------------------------- docker compose config
def test_docker_compose_config_validates() -> None:
    client = compose_client()
    if client is None:
        pytest.skip("neither `docker compose` (CLI plugin) nor `docker-compose` is installed")
    r = subprocess.run([*client, "-f", str(COMPOSE_FILE), "config", "--quiet"], cwd=REPO_ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"{' '.join(client)} config:\n{r.stdout}\n{r.stderr}"


# ---------------------------------------------------------------- the cluster, for real
def test_compose_cluster_with_testcontainers(monkeypatch: pytest.MonkeyPatch) -> None:
    compose_mod = pytest.importorskip("testcontainers.compose")
    error = docker_engine_error()
    if error is not None:
        pytest.skip(f"no Docker engine reachable, so the compose cluster cannot run here "
                    f"({error})")
    if compose_client() != ["docker", "compose"]:
        pytest.skip("testcontainers drives `docker compose`; the CLI plugin is not installed")
    busy = [p for p in HOST_PORTS if not port_is_free("127.0.0.1", p)]
    if busy:
        pytest.skip(f"host ports {busy} are taken (another compose cluster running?)")
    # Own project name: `down --volumes` afterwards must not touch a user's own cluster.
    monkeypatch.setenv("COMPOSE_PROJECT_NAME", f"samsa-test-{os.getpid()}")
    with compose_mod.DockerCompose(REPO_ROOT, compose_file_name="docker-compose.yml",
                                   build=True, wait=True) as cluster:
        # Registrations, read inside the compose network with the image's own kazoo.
        script = (
            "import time\n"
            "from kazoo.client import KazooClient\n"
            "zk = KazooClient(hosts='zookeeper:2181/samsa'); zk.start(timeout=30)\n"
            "deadline = time.time() + 60\n"
            "while time.time() < deadline:\n"
            "    ids = zk.get_children('/brokers/ids') if zk.exists('/brokers/ids') else []\n"
            "    if len(ids) == 3: break\n"
            "    time.sleep(0.5)\n"
            "print(' '.join(sorted(ids)))\n"
        )
        out, err, rc = cluster.exec_in_container(["python", "-c", script], "samsa-1")
        assert rc == 0 and out.split() == ["1", "2", "3"], (out, err, cluster.get_logs())

        from confluent_kafka.admin import AdminClient

        # From the host, each published port answers on its own (ApiVersions + Metadata on
        # the bootstrap connection) and advertises its service name.
        for broker_id, port in enumerate(HOST_PORTS, start=1):
            md = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"}).list_topics(timeout=30)
            assert (md.brokers[broker_id].host, md.brokers[broker_id].port) == (
                f"samsa-{broker_id}", port)
