"""share.auto.offset.reset=by_duration:<ISO-8601 duration> (Kafka 4.4's GroupConfig accepts
it): a share-partition with no state starts at the first record at most that old."""

from __future__ import annotations

import time

from samsa.protocol.errors import ErrorCode

from .harness import values_of
from .test_share_groups import GROUP_RESOURCE, SET, _beat, _share_fetch


async def _set_reset(h, value: str):
    r = await h.call("IncrementalAlterConfigs", 1, {"resources": [{
        "resource_type": GROUP_RESOURCE, "resource_name": "sg", "configs": [
            {"name": "share.auto.offset.reset", "config_operation": SET, "value": value}]}],
        "validate_only": False})
    return r.responses[0]


async def test_by_duration_starts_at_the_records_that_young(handlers):
    tid = (await handlers.create_topic("t")).topic_id
    now = int(time.time() * 1000)
    await handlers.produce("t", 0, [b"old"], default_timestamp=now - 2 * 3_600_000)
    await handlers.produce("t", 0, [b"a", b"b"], default_timestamp=now)
    await handlers.produce("t", 0, [b"c"], default_timestamp=now - 3 * 3_600_000)
    r = await _set_reset(handlers, "by_duration:PT1H")
    assert (r.error_code, r.error_message) == (ErrorCode.none, None)
    await handlers.find_coordinator("sg")
    beat = await handlers.call("ShareGroupHeartbeat", 1, _beat("m1", 0, ["t"]))
    assert beat.error_code == ErrorCode.none
    fetched = await handlers.call("ShareFetch", 1, _share_fetch(tid, 0))
    # from the first record at most an hour old on, whatever the timestamps after it
    assert values_of(fetched.responses[0].partitions[0].records) == [b"a", b"b", b"c"]


async def test_by_duration_must_parse_and_not_be_negative(handlers):
    for value, says in [("by_duration:-PT1H", "must not be negative"),
                        ("by_duration:soon", "Unable to parse duration"),
                        ("sometime", "must be one of")]:
        r = await _set_reset(handlers, value)
        assert r.error_code == ErrorCode.invalid_config and says in r.error_message, value
