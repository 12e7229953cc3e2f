"""The image `make image` builds (Dockerfile, docker/entrypoint.py), run as a user runs it:
`docker run` with a named volume and a published port, configured by KAFKA_CFG_* variables;
healthy by its own HEALTHCHECK (ApiVersions), the broker not root, a client on the host
producing with acks=all; then `docker kill` and `docker start` with nothing acknowledged lost.
Skips only where no Docker engine can run (tests/support/docker_env.py starts Debian's dockerd
when none runs and builds a stand-in python:3.11-slim where no registry serves it).
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from samsa.testing import free_port
from tests.support import docker_env, docker_image

TAG = "samsa:image-test"
TOPIC = "image-test"
RECORDS = 2000
# The engine's bridges and iptables rules change the host's network: one worker at a time
# (tests/support/xdist_units.py), with the compose test.
pytestmark = pytest.mark.xdist_group("host-network")


def docker(*args: str, timeout: float = 120) -> str:
    return docker_env.run(["docker", *args], timeout=timeout).stdout.strip()


@pytest.fixture(scope="module")
def image() -> Iterator[str]:
    try:
        engine = docker_env.Engine().start()
    except docker_env.DockerUnavailable as e:
        pytest.skip(f"the image cannot run on this machine: {e}")
    try:
        docker_image.build(TAG)
        yield TAG
    finally:
        subprocess.run(["docker", "image", "rm", "-f", TAG], capture_output=True, timeout=120)
        engine.stop()


def wait_healthy(name: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while (status := docker("inspect", "-f", "{{.State.Health.Status}}", name)) != "healthy":
        assert status in ("starting", "unhealthy") and time.monotonic() < deadline, (
            f"{name} is {status}:\n{docker('logs', '--tail', '40', name)}")
        time.sleep(0.5)


def produce(bootstrap: str) -> list[bytes]:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5})
    acked: list[bytes] = []

    def delivered(err: object, msg: object) -> None:
        assert err is None, err
        acked.append(msg.value())  # type: ignore[attr-defined]

    for i in range(RECORDS):
        producer.produce(TOPIC, key=str(i % 7).encode(), value=f"record-{i}".encode(),
                         on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(60) == 0
    return acked


def consume_all(bootstrap: str, partitions: int, expected: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "image-test",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(partitions)])
    read: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(read) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                read.append(msg.value())
    finally:
        consumer.close()
    return read


def test_docker_run_serves_clients_and_keeps_data_across_a_kill(image: str) -> None:
    config = json.loads(docker("image", "inspect", image))[0]["Config"]
    assert config["User"] == "samsa"
    assert "/var/lib/samsa" in config["Volumes"]
    assert "healthcheck" in config["Healthcheck"]["Test"]
    port = free_port()
    name = f"samsa-image-test-{port}"
    bootstrap = f"127.0.0.1:{port}"
    try:
        docker("run", "-d", "--name", name, "-p", f"{bootstrap}:9092",
               "-v", f"{name}:/var/lib/samsa", "--health-interval", "1s",
               "-e", f"KAFKA_CFG_ADVERTISED_LISTENERS=PLAINTEXT://{bootstrap}",
               "-e", "KAFKA_CFG_NUM_PARTITIONS=3", image)
        wait_healthy(name)
        assert docker("exec", name, "id", "-u") != "0"
        acked = produce(bootstrap)  # to a topic created on first use, num.partitions from env
        probe = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe"})
        partitions = len(probe.list_topics(TOPIC, timeout=30).topics[TOPIC].partitions)
        probe.close()
        assert partitions == 3
        assert sorted(acked) == sorted(f"record-{i}".encode() for i in range(RECORDS))

        docker("kill", name)  # SIGKILL to the container's processes
        assert docker("inspect", "-f", "{{.State.Running}}", name) == "false"
        docker("start", name)
        wait_healthy(name)
        read = consume_all(bootstrap, partitions, len(acked))
        assert sorted(read) == sorted(acked), f"{len(read)} of {len(acked)} acknowledged read"
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True, timeout=120)
        subprocess.run(["docker", "volume", "rm", "-f", name], capture_output=True, timeout=120)
