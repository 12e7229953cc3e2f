"""Client quotas in ZooKeeper, laid out as Kafka lays them out: what one broker alters every
other broker learns from the /config/changes notification, and a user's node keeps both its
SCRAM credentials and its quotas."""

from __future__ import annotations

import asyncio
import json
import uuid

from samsa.broker.cluster.metadata_store import BrokerInfo
from samsa.broker.cluster.zk.store import ZkMetadataStore
from samsa.broker.security.scram import credential_from_salted


def _store(zookeeper, chroot: str, broker_id: int) -> ZkMetadataStore:
    info = BrokerInfo(broker_id, "127.0.0.1", 9000 + broker_id)
    return ZkMetadataStore(f"{zookeeper.connect_string}/{chroot}", info, session_timeout_ms=4000)


async def _until(cond, what: str, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():
        assert asyncio.get_running_loop().time() < deadline, what
        await asyncio.sleep(0.05)


async def test_client_quotas_are_shared_through_zookeeper(zookeeper):
    chroot = f"q{uuid.uuid4().hex[:8]}"
    a, b = _store(zookeeper, chroot, 1), _store(zookeeper, chroot, 2)
    await a.start()
    await b.start()
    seen_by_b = []
    b.add_client_quota_listener(lambda quotas: seen_by_b.append(dict(quotas)))
    try:
        scram = credential_from_salted("SCRAM-SHA-256", b"s" * 32, b"salt", 4096)
        await a.alter_scram_credentials([("alice", "SCRAM-SHA-256", scram)])
        alice, alice_app = (("user", "alice"),), (("client-id", "app"), ("user", "alice"))
        default_client, dn_user = (("client-id", None),), (("user", "CN=x,O=y"),)
        await a.alter_client_quotas([
            (alice, {"producer_byte_rate": 1024.0}),
            (alice_app, {"consumer_byte_rate": 2048.0}),
            (default_client, {"request_percentage": 12.5}),
            (dn_user, {"producer_byte_rate": 10.0}),
        ])
        expected = {alice: {"producer_byte_rate": 1024.0},
                    alice_app: {"consumer_byte_rate": 2048.0},
                    default_client: {"request_percentage": 12.5},
                    dn_user: {"producer_byte_rate": 10.0}}
        assert a.client_quotas() == expected
        await _until(lambda: b.client_quotas() == expected, "broker 2 learns the quotas")
        assert seen_by_b[-1] == expected

        # Kafka's znodes: sanitized names, <default>, both kinds of config in one user node
        def node(path: str) -> dict:
            return json.loads(a.session.zk.get(path)[0])

        user = node("/config/users/alice")
        assert user["version"] == 1 and user["config"]["producer_byte_rate"] == "1024"
        assert user["config"]["SCRAM-SHA-256"] == scram.to_config()
        assert node("/config/users/alice/clients/app")["config"] == {
            "consumer_byte_rate": "2048"}
        assert node("/config/clients/<default>")["config"] == {"request_percentage": "12.5"}
        assert "CN%3Dx%2CO%3Dy" in a.session.zk.get_children("/config/users")
        paths = {json.loads(a.session.zk.get(f"/config/changes/{c}")[0])["entity_path"]
                 for c in a.session.zk.get_children("/config/changes")}
        assert {"users/alice", "users/alice/clients/app", "clients/<default>"} <= paths

        # a SCRAM change keeps the quotas; removing the quota keeps the credential
        await b.alter_scram_credentials([("alice", "SCRAM-SHA-512", credential_from_salted(
            "SCRAM-SHA-512", b"t" * 64, b"salt", 4096))])
        assert node("/config/users/alice")["config"]["producer_byte_rate"] == "1024"
        await b.alter_client_quotas([(alice, {"producer_byte_rate": None})])
        await _until(lambda: alice not in a.client_quotas(), "broker 1 learns the removal")
        assert set(node("/config/users/alice")["config"]) == {"SCRAM-SHA-256", "SCRAM-SHA-512"}
        assert a.scram_credential("alice", "SCRAM-SHA-256") is not None

        # a name Kafka's Sanitizer escapes: one node for both kinds too
        await a.alter_scram_credentials([("dave@corp", "SCRAM-SHA-256", scram)])
        await a.alter_client_quotas([((("user", "dave@corp"),), {"producer_byte_rate": 5.0})])
        assert set(node("/config/users/dave%40corp")["config"]) == {
            "SCRAM-SHA-256", "producer_byte_rate"}
        await _until(lambda: b.scram_credential("dave@corp", "SCRAM-SHA-256") is not None
                     and (("user", "dave@corp"),) in b.client_quotas(), "broker 2 reads dave")

        # a broker started later reads what is there
        c = _store(zookeeper, chroot, 3)
        await c.start()
        try:
            await _until(lambda: c.client_quotas() == b.client_quotas(), "broker 3 reads all")
        finally:
            await c.close()
    finally:
        await a.close()
        await b.close()


def test_a_quota_altered_through_one_broker_holds_on_every_broker(zookeeper, tmp_path):
    """Two brokers: the quota set through broker 0 is described by broker 1 and throttles a
    client there."""
    from tests.cluster.cluster import Cluster, wait_until
    from tests.protocol.wire import WireClient

    cluster = Cluster(zookeeper, tmp_path, size=2).start()
    try:
        first, second = (b.bootstrap for b in cluster.brokers)
        with WireClient(first) as w:
            altered = w.call(49, 1, {"validate_only": False, "entries": [{
                "entity": [{"entity_type": "client-id", "entity_name": "busy"}],
                "ops": [{"key": "request_percentage", "value": 0.001, "remove": False}]}]})
        assert altered.entries[0].error_code == 0

        def described() -> bool:
            with WireClient(second) as w:
                resp = w.call(48, 1, {"strict": True, "components": [
                    {"entity_type": "client-id", "match_type": 0, "match": "busy"}]})
            return [(v.key, v.value) for e in resp.entries for v in e.values] \
                == [("request_percentage", 0.001)]

        wait_until(described, 10, "broker 1 describes the quota set through broker 0")
        # Kafka's default window (11 x 1 s) lets 0.001 % be ~100 us of handler time: ask until
        # the client is over it (a handful of fast Metadata calls may not be yet).
        throttled = 0.0
        with WireClient(second, client_id=b"busy") as w:
            for _ in range(200):
                answer = w.call(3, 12, {"topics": None, "allow_auto_topic_creation": False,
                                        "include_topic_authorized_operations": False})
                throttled = answer.throttle_time.total_seconds()
                if throttled > 0:
                    break
        assert throttled > 0
    finally:
        cluster.close()
