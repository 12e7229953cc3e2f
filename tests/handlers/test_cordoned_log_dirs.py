"""cordoned.log.dirs (KIP-1066): a cordoned log directory takes no new partitions (unless every
one is cordoned: then the first does), DescribeLogDirs v5 says which are cordoned, and the
property changes per broker while the broker runs, refused with Kafka's message when it names a
directory that is not one of log.dirs (or that mixes * with names)."""

from __future__ import annotations

from samsa.protocol.errors import ErrorCode

from .harness import Handlers

INCREMENTAL_ALTER_CONFIGS, BROKER = "IncrementalAlterConfigs", 4


async def _cordon(h: Handlers, value: str) -> object:
    r = await h.call(INCREMENTAL_ALTER_CONFIGS, 1, {"validate_only": False, "resources": [
        {"resource_type": BROKER, "resource_name": "0", "configs": [
            {"name": "cordoned.log.dirs", "config_operation": 0, "value": value}]}]})
    return r.responses[0]


async def _dirs_of(h: Handlers, topic: str, count: int) -> set[str | None]:
    """Where the topic's partitions were placed (a produce to each: its replica is up)."""
    for p in range(count):
        assert (await h.produce(topic, p, [b"x"])).error_code == ErrorCode.none
    return {h.broker.log_manager.dir_of(topic, p) for p in range(count)}


async def test_cordoned_dirs_take_no_new_partitions_and_describe_says_so(tmp_path):
    a, b, c = (str(tmp_path / n) for n in "abc")
    h = await Handlers.open(tmp_path / "data", {"log.dirs": f"{a},{b},{c}",
                                                "cordoned.log.dirs": a})
    try:
        await h.create_topic("t", 6)
        assert await _dirs_of(h, "t", 6) == {b, c}
        r = await h.call("DescribeLogDirs", 5, {"topics": None})
        assert {d.log_dir: d.is_cordoned for d in r.results} == {a: True, b: False, c: False}
        # no replica moves into a cordoned directory either
        r = await h.call("AlterReplicaLogDirs", 2, {"dirs": [
            {"path": a, "topics": [{"name": "t", "partitions": [0]}]}]})
        assert r.results[0].partitions[0].error_code == ErrorCode.invalid_replica_assignment
        v4 = await h.call("DescribeLogDirs", 4, {"topics": None})
        assert not any(hasattr(d, "is_cordoned") for d in v4.results)  # v5 on

        # changed while running: every directory cordoned, a new partition goes to the first
        assert (await _cordon(h, "*")).error_code == ErrorCode.none
        await h.create_topic("u", 2)
        assert await _dirs_of(h, "u", 2) == {a}
        r = await h.call("DescribeLogDirs", 5, {"topics": None})
        assert all(d.is_cordoned for d in r.results)

        refused = await _cordon(h, f"{a},{tmp_path / 'elsewhere'}")
        # refused as any dynamic broker config that does not validate
        assert refused.error_code == ErrorCode.invalid_request
        assert (await _cordon(h, f"*,{a}")).error_code == ErrorCode.invalid_request
        assert h.broker.log_manager.cordoned == {a, b, c}  # unchanged
        assert (await _cordon(h, "")).error_code == ErrorCode.none
        assert h.broker.log_manager.cordoned == frozenset()
        await h.create_topic("v", 1)
        assert await _dirs_of(h, "v", 1) == {a}  # open again, and the emptiest
    finally:
        await h.close()
