"""A broker's request handlers called in-process: real storage (a data directory of the test's
own), the real metadata store, replica manager and coordinators, started as `samsa serve`
starts them but without listeners. No socket, no process, no ZooKeeper: a call is the handler
the dispatcher would pick, given the RequestContext it would build, and its answer built as the
kio response of the version asked for (so every field of that version is there to assert on).

    h = await Handlers.open(tmp_path)
    r = await h.call("CreateTopics", 7, {"topics": [...], "timeout": 5000})
    assert r.topics[0].error_code == ErrorCode.none
    await h.close()

`principal`, `listener` and `sasl` (a connection's SaslSession) set who sends a request;
`authorizer=True` opens the broker with Kafka's ACL authorizer and no ACLs, where only `ADMIN`
(User:admin, a super user) may act.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from samsa.broker.app import Broker
from samsa.broker.context import ANONYMOUS, KafkaPrincipal, RequestContext
from samsa.broker.security.sasl import SaslSession
from samsa.config.loader import load_config
from samsa.protocol.codec import build, plans, request_type, response_type
from samsa.protocol.encoder import encode_response
from samsa.protocol.errors import ErrorCode
from samsa.protocol.records import build_batch, decode_records, iter_batches

ADMIN = KafkaPrincipal("User", "admin")
ALICE = KafkaPrincipal("User", "alice")
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


class Handlers:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.registry = broker.registry
        self._correlation = 0

    @classmethod
    async def open(cls, data_dir: Path, settings: Mapping[str, Any] | None = None, *,
                   authorizer: bool = False) -> Handlers:
        props = {"log.dirs": str(data_dir), "listeners": "PLAINTEXT://127.0.0.1:9092",
                 # the coordinators' internal topics: one replica, a few partitions
                 "offsets.topic.replication.factor": "1",
                 "offsets.topic.num.partitions": "4",
                 "transaction.state.log.replication.factor": "1",
                 "transaction.state.log.num.partitions": "4",
                 "transaction.state.log.min.isr": "1",
                 "share.coordinator.state.topic.replication.factor": "1",
                 "share.coordinator.state.topic.num.partitions": "2",
                 # a group's first rebalance completes at once (one member joins)
                 "group.initial.rebalance.delay.ms": "0"}
        if authorizer:
            props |= {"authorizer.class.name": AUTHORIZER, "super.users": str(ADMIN)}
        props |= {k: str(v).lower() if isinstance(v, bool) else str(v)
                  for k, v in (settings or {}).items()}
        broker = Broker(load_config(None, props))
        # Broker.start() without the listeners, the controller and the background loops
        await broker.dynamic_config.start()
        broker.producer_ids.start()
        broker.log_manager.startup(broker._config_for_topic_name)
        broker.replicas.load_all()
        await broker.transactions.start()
        await broker.groups.start()
        await broker.share_state.start()
        return cls(broker)

    async def close(self) -> None:
        b = self.broker
        await b.replicas.stop_creating()
        await b.transactions.stop()
        b.txn_verifier.close()
        await b.groups.stop()
        b.shares.stop()
        await b.share_state.stop()
        b.share_persister.close()
        b.log_manager.shutdown()

    def context(self, api: str | int, version: int, *, principal: KafkaPrincipal = ANONYMOUS,
                listener: str = "PLAINTEXT", sasl: SaslSession | None = None
                ) -> RequestContext:
        spec = self._spec(api)
        self._correlation += 1
        return RequestContext(spec.key, version, self._correlation, "handler-test", listener,
                              "127.0.0.1:50000", int(time.time() * 1000),
                              self.broker.dispatcher.services, principal, sasl)

    async def call(self, api: str | int, version: int, body: Mapping[str, Any] | None = None,
                   *, principal: KafkaPrincipal = ANONYMOUS, listener: str = "PLAINTEXT",
                   sasl: SaslSession | None = None) -> Any:
        """The handler's answer as kio's response of `version` (None: no response, as for
        Produce with acks=0). Raises what the handler raises (the dispatcher would log it)."""
        spec = self._spec(api)
        assert spec.accepts(version), f"{spec.name} v{version} is not served"
        req_type = request_type(spec.key, version)
        _check_keys(req_type, body or {})
        request = build(req_type, body or {})
        ctx = self.context(api, version, principal=principal, listener=listener, sasl=sasl)
        result = await spec.handler(ctx, request)
        if result is None:
            return None
        resp_type = response_type(spec.key, version)
        encode_response(resp_type, result)  # what the dispatcher writes: must encode
        return build(resp_type, result)

    def _spec(self, api: str | int) -> Any:
        if isinstance(api, int):
            spec = self.registry.get(api)
        else:
            spec = next((s for s in self.registry.all() if s.name == api), None)
        assert spec is not None, f"no handler for {api}"
        return spec

    # ---- set-ups shared by the families' tests (as the super user: allowed either way) ------
    async def create_topic(self, name: str, partitions: int = 1,
                           configs: Mapping[str, str] | None = None) -> Any:
        r = await self.call("CreateTopics", 7, {
            "topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1,
                        "configs": [{"name": k, "value": v} for k, v in
                                    (configs or {}).items()]}],
            "timeout": 5000}, principal=ADMIN)
        assert r.topics[0].error_code == ErrorCode.none, r.topics[0]
        return r.topics[0]

    async def produce(self, topic: str, partition: int, values: list[bytes],
                      transactional_id: str | None = None, **batch: Any) -> Any:
        """Produce v9 with acks=-1 of one batch (transactional with a transactional id); the
        partition's answer."""
        records = bytes(build_batch([(None, v) for v in values],
                                    transactional=transactional_id is not None, **batch))
        r = await self.call("Produce", 9, {
            "transactional_id": transactional_id, "acks": -1, "timeout": 5000,
            "topic_data": [{"name": topic, "partition_data": [
                {"index": partition, "records": records}]}]}, principal=ADMIN)
        return r.responses[0].partition_responses[0]

    async def find_coordinator(self, key: str, key_type: int = 0) -> Any:
        """FindCoordinator v4 as a client asks it first: creates the internal topic (the
        offsets' or the transactions') and loads the partition of `key`; its answer."""
        for _ in range(100):
            r = await self.call("FindCoordinator", 4, {"key_type": key_type,
                                                       "coordinator_keys": [key]},
                                principal=ADMIN)
            c = r.coordinators[0]
            if c.error_code not in (ErrorCode.coordinator_not_available,
                                    ErrorCode.coordinator_load_in_progress):
                return c
            await asyncio.sleep(0.01)
        raise AssertionError(f"no coordinator for {key!r}: {c}")

    async def retry_call(self, api: str | int, version: int, body: Mapping[str, Any], *,
                         principal: KafkaPrincipal = ANONYMOUS) -> Any:
        """`call`, again while the answer is COORDINATOR_LOAD_IN_PROGRESS (retriable), as a
        client does: InitProducerId gets it until the broker's first block of producer ids is
        claimed (in the background, as Kafka's RPCProducerIdManager)."""
        for _ in range(500):
            r = await self.call(api, version, body, principal=principal)
            if r.error_code != ErrorCode.coordinator_load_in_progress:
                return r
            await asyncio.sleep(0.01)
        raise AssertionError(f"{api} still loading: {r}")

    async def fetch_as(self, principal: KafkaPrincipal, topic: str, partition: int = 0) -> Any:
        """The error code of a Fetch of the partition from offset 0 by `principal`."""
        r = await self.call("Fetch", 12, {
            "replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [{
                "partition": partition, "fetch_offset": 0, "current_leader_epoch": -1,
                "last_fetched_epoch": -1, "log_start_offset": -1,
                "partition_max_bytes": 1 << 20}]}]}, principal=principal)
        return r.responses[0].partitions[0].error_code

    async def fetch(self, topic: str, partition: int, offset: int = 0,
                    isolation_level: int = 0) -> Any:
        """Fetch v12 (by name) of one partition, no wait; the partition's answer."""
        r = await self.call("Fetch", 12, {
            "replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20,
            "isolation_level": isolation_level, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [{
                "partition": partition, "fetch_offset": offset, "current_leader_epoch": -1,
                "last_fetched_epoch": -1, "log_start_offset": -1,
                "partition_max_bytes": 1 << 20}]}]}, principal=ADMIN)
        assert r.error_code == ErrorCode.none
        return r.responses[0].partitions[0]


async def eventually(check: Callable[[], Awaitable[bool]], timeout_s: float = 10.0) -> None:
    """Wait until `check()` holds: for what completes after the answer (transaction markers)."""
    deadline = time.monotonic() + timeout_s
    while not await check():
        assert time.monotonic() < deadline, "the condition never held"
        await asyncio.sleep(0.01)


async def begin_transaction(h: Handlers, transactional_id: str, topic: str,
                            partition: int) -> tuple[int, int]:
    """InitProducerId and AddPartitionsToTxn (v3, as a client): the producer id and epoch."""
    init = await h.retry_call("InitProducerId", 4, {
        "transactional_id": transactional_id, "transaction_timeout": 60_000,
        "producer_id": -1, "producer_epoch": -1}, principal=ADMIN)
    assert init.error_code == ErrorCode.none, init
    added = await h.call("AddPartitionsToTxn", 3, {
        "v3_and_below_transactional_id": transactional_id,
        "v3_and_below_producer_id": init.producer_id,
        "v3_and_below_producer_epoch": init.producer_epoch,
        "v3_and_below_topics": [{"name": topic, "partitions": [partition]}]}, principal=ADMIN)
    result = added.results_by_topic_v3_and_below[0].results_by_partition[0]
    assert result.partition_error_code == ErrorCode.none, added
    return init.producer_id, init.producer_epoch


def _check_keys(entity: type, body: Mapping[str, Any]) -> None:
    """A field name the version lacks is a mistake of the test (build() would drop it)."""
    fields = plans(entity)
    unknown = set(body) - set(fields)
    assert not unknown, f"{entity.__qualname__} has no field {sorted(unknown)}"
    for name, value in body.items():
        nested = fields[name].nested
        if nested is not None and value is not None:
            for item in value if fields[name].is_array else [value]:
                if isinstance(item, Mapping):
                    _check_keys(nested, item)


def values_of(records: bytes | None) -> list[bytes | None]:
    """The values of the data records in a Fetch answer's records (control batches skipped)."""
    out: list[bytes | None] = []
    for pos, header in iter_batches(records or b""):
        if not header.is_control:
            out += [r.value for r in decode_records(records or b"", pos, header)]
    return out
