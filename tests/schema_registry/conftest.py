"""A real Samsa broker with its schema registry listening, for the client and REST tests."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.broker import BrokerProcess, free_port


@dataclass
class RegistryBroker:
    broker: BrokerProcess
    url: str

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap


def start_registry_broker(data: Path, name: str) -> RegistryBroker:
    url = f"http://127.0.0.1:{free_port()}"
    broker = BrokerProcess(data, settings={"schema.registry.listeners": url}, name=name)
    broker.start()
    return RegistryBroker(broker, url)


@pytest.fixture
def registry_broker(tmp_path: Path) -> Iterator[RegistryBroker]:
    """A broker of the test's own (a test that restarts or kills it)."""
    rb = start_registry_broker(tmp_path / "data", "registry-broker")
    try:
        yield rb
    finally:
        rb.broker.close()


@pytest.fixture(scope="module")
def shared_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegistryBroker]:
    """One broker for a module's tests, each on subjects of its own."""
    rb = start_registry_broker(tmp_path_factory.mktemp("registry") / "data", "shared-registry")
    try:
        yield rb
    finally:
        rb.broker.close()
