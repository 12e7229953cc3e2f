"""broker/network/quotas.py against Kafka's ClientQuotaManager: which quota a (user, client id) is
held to, who shares a sensor, the throttle time of QuotaUtils.throttleTime, and the single
broker's metadata file keeping quotas across a restart."""

from __future__ import annotations

from pathlib import Path

from samsa.broker.cluster.metadata_store import BrokerInfo, LocalMetadataStore, QuotaEntity
from samsa.broker.network.quotas import QuotaManager, Sensor

U, C = "user", "client-id"
LEVELS: list[QuotaEntity] = [  # Kafka's order, most specific first
    ((C, "app"), (U, "alice")),
    ((C, None), (U, "alice")),
    ((U, "alice"),),
    ((C, "app"), (U, None)),
    ((C, None), (U, None)),
    ((U, None),),
    ((C, "app"),),
    ((C, None),),
]


def test_resolution_follows_kafkas_order() -> None:
    quotas = {entity: {"producer_byte_rate": float(1000 + i)} for i, entity in enumerate(LEVELS)}
    manager = QuotaManager(11, 1)
    for i in range(len(LEVELS)):
        manager.update(quotas)
        sensor = manager.for_client("alice", "app").produce
        assert sensor is not None and sensor.bound == 1000 + i, LEVELS[i]
        del quotas[LEVELS[i]]
    manager.update(quotas)
    assert manager.for_client("alice", "app").produce is None
    assert not manager.active


def test_who_shares_a_sensor() -> None:
    manager = QuotaManager(11, 1)
    manager.update({((U, "alice"),): {"producer_byte_rate": 10.0},
                    ((C, None),): {"consumer_byte_rate": 20.0}})
    # a user quota is shared by all the user's clients
    assert manager.for_client("alice", "a").produce is manager.for_client("alice", "b").produce
    # a default client-id quota holds each client id on its own
    one, two = manager.for_client("bob", "a").fetch, manager.for_client("carol", "b").fetch
    assert one is not None and two is not None and one is not two
    assert manager.for_client("bob", "a").fetch is manager.for_client("carol", "a").fetch
    assert manager.for_client("bob", "a").produce is None


def test_throttle_time_is_kafkas() -> None:
    # 11 samples of 1 s: a first record counts over 10 s (num - 1 whole windows)
    sensor = Sensor(100.0, 1000, 11)
    assert sensor.record_and_throttle_ms(1000, 0) == 0  # 100/s: at the bound, not over it
    # at 0.5 s the window is 10.5 s (Rate.windowSize): 3000 / 10.5 s observed, and
    # (observed - 100) / 100 x 10.5 s to wait
    assert sensor.record_and_throttle_ms(2000, 500) == round((3000 / 10.5 - 100) / 100 * 10_500)
    assert Sensor(100.0, 1000, 11).record_and_throttle_ms(3000, 0, cap_ms=1000) == 1000
    # samples older than num x window no longer count
    assert sensor.record_and_throttle_ms(10, 20_000) == 0


def test_fetch_cap_is_one_full_window_of_the_quota() -> None:
    manager = QuotaManager(11, 2)
    manager.update({((C, "c"),): {"consumer_byte_rate": 1000.0}})
    assert manager.max_fetch_bytes("PLAINTEXT", "ANONYMOUS", "c") == 1000 * 10 * 2
    assert manager.max_fetch_bytes("PLAINTEXT", "ANONYMOUS", "other") == 2**31 - 1


def test_local_store_keeps_quotas_across_a_restart(tmp_path: Path) -> None:
    import asyncio

    info = BrokerInfo(0, "127.0.0.1", 9092)
    store = LocalMetadataStore(tmp_path, info)
    seen: list[dict[QuotaEntity, dict[str, float]]] = []
    store.add_client_quota_listener(seen.append)
    asyncio.run(store.alter_client_quotas([
        (LEVELS[0], {"producer_byte_rate": 5.0, "request_percentage": 12.5}),
        (LEVELS[7], {"consumer_byte_rate": 7.0}),
    ]))
    asyncio.run(store.alter_client_quotas([(LEVELS[0], {"request_percentage": None})]))
    expected = {LEVELS[0]: {"producer_byte_rate": 5.0}, LEVELS[7]: {"consumer_byte_rate": 7.0}}
    assert seen[-1] == expected
    assert LocalMetadataStore(tmp_path, info).client_quotas() == expected
