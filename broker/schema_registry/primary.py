"""Where the registry's primary is: the broker leading `_schemas` partition 0. Its registry
URL is its `schema.registry.listeners`, which it describes (DescribeConfigs on its BROKER
resource, as Kafka's tools ask a broker for its own configuration); the answer is kept for the
leadership it was asked for."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from samsa.protocol.errors import ErrorCode

from ..network.interbroker import BrokerConnection, BrokerUnavailable

if TYPE_CHECKING:
    from ..cluster.metadata_store import MetadataStore

log = logging.getLogger(__name__)

DESCRIBE_CONFIGS, DESCRIBE_CONFIGS_VERSION = 32, 4
BROKER_RESOURCE = 4
LISTENERS = "schema.registry.listeners"


class PrimaryLocator:
    def __init__(self, store: MetadataStore, topic: str, broker_id: int) -> None:
        self.store = store
        self.topic = topic
        self.broker_id = broker_id
        self._known: tuple[int, int, str | None] | None = None  # leader, epoch, its URL

    def leader(self) -> tuple[int, int] | None:
        """The primary's broker id and leader epoch (None while the partition has none)."""
        state = self.store.topic(self.topic)
        partition = state.partitions.get(0) if state is not None else None
        if partition is None or partition.leader < 0:
            return None
        return partition.leader, partition.leader_epoch

    async def url(self) -> str | None:
        """The primary's registry URL; None when there is no other primary or it serves no
        registry."""
        leader = self.leader()
        if leader is None or leader[0] == self.broker_id:
            return None
        if self._known is not None and self._known[:2] == leader:
            return self._known[2]
        url = await self._describe(leader[0])
        self._known = (*leader, url)
        return url

    async def _describe(self, broker: int) -> str | None:
        conn = BrokerConnection(self.store, broker, f"samsa-schema-registry-{self.broker_id}",
                                timeout_s=10.0)
        body = {"resources": [{"resource_type": BROKER_RESOURCE, "resource_name": str(broker),
                               "configuration_keys": [LISTENERS]}],
                "include_synonyms": False, "include_documentation": False}
        try:
            response = await conn.request(DESCRIBE_CONFIGS, DESCRIBE_CONFIGS_VERSION, body)
        except BrokerUnavailable as exc:
            log.info("schema registry: the primary (broker %d) is unreachable: %s", broker, exc)
            return None
        finally:
            conn.close()
        for result in response.results:
            if result.error_code != ErrorCode.none:
                continue
            for entry in result.configs:
                if str(entry.name) == LISTENERS and entry.value:
                    return str(entry.value).split(",")[0].strip().rstrip("/")
        return None
