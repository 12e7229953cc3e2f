import pytest

from config import Settings


@pytest.fixture
def settings(samsa_broker) -> Settings:
    """The application's settings, pointed at a fresh Samsa broker with an `orders` topic."""
    samsa_broker.create_topic("orders", partitions=3)
    print(f"samsa_broker ready after {samsa_broker.startup_seconds:.3f} s")
    return Settings(bootstrap_servers=samsa_broker.bootstrap)
