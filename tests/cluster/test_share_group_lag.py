"""Share-group lag (KIP-1226) across brokers: the share-partition's leader, its share
coordinator and the group's coordinator are three different brokers, so the delivery-complete
count travels in WriteShareGroupState v1 and ReadShareGroupStateSummary v1 between brokers, and
the group coordinator asks the leader for the high watermark (ListOffsets) to answer
DescribeShareGroupOffsets v1."""

from __future__ import annotations

import uuid

import pytest

from tests.cluster import test_share_group_failover as failover
from tests.cluster.cluster import GROUP_KEY, Cluster, wait_until
from tests.cluster.test_share_group_coordinator_failover import RETRIABLE, _fetch, _hb
from tests.protocol.wire import WireClient

pytestmark = pytest.mark.timeout(150)
SHARE_ACKNOWLEDGE, DESCRIBE_SHARE_GROUP_OFFSETS = 79, 90
RECORDS, ACCEPT, REJECT = 40, 1, 3


def test_share_group_lag_with_leader_and_coordinators_on_three_brokers(zookeeper, tmp_path):
    cluster = Cluster(zookeeper, tmp_path, **failover.SETTINGS).start()
    try:
        topic, group, tid = failover._setup(cluster, RECORDS)
        leader = cluster.leaders(topic)[0]
        while len({leader, coordinator := failover._coordinator(cluster, GROUP_KEY, group),
                   failover._share_coordinator(cluster, group, tid)}) < 3:
            group = f"sg-{uuid.uuid4().hex[:6]}"
            failover._configure_group(cluster, group)
        member = uuid.uuid4().hex
        with WireClient(cluster.broker(coordinator).bootstrap) as w:
            wait_until(lambda: _hb(w, group, member, 0, topic).error_code not in RETRIABLE,
                       20, "a loaded coordinator")
        with WireClient(cluster.broker(leader).bootstrap) as c:
            held = _fetch(c, group, member, tid, 0)
            assert held == list(range(10)), held
            # settled after the start offset: accepted 6..7, rejected 8..9; 0..5 stay held
            r = c.call(SHARE_ACKNOWLEDGE, 1, {
                "group_id": group, "member_id": member, "share_session_epoch": 1,
                "topics": [{"topic_id": tid, "partitions": [{
                    "partition_index": 0, "acknowledgement_batches": [
                        {"first_offset": 6, "last_offset": 7, "acknowledge_types": [ACCEPT]},
                        {"first_offset": 8, "last_offset": 9,
                         "acknowledge_types": [REJECT]}]}]}]})
            assert r.error_code == 0 and r.responses[0].partitions[0].error_code == 0, r
            with WireClient(cluster.broker(coordinator).bootstrap) as w:
                d = w.call(DESCRIBE_SHARE_GROUP_OFFSETS, 1, {"groups": [
                    {"group_id": group, "topics": [{"topic_name": topic, "partitions": [0]}]}]})
        (p,) = d.groups[0].topics[0].partitions
        assert (p.error_code, p.start_offset, p.lag) == (0, 0, RECORDS - 4), d
    finally:
        cluster.close()
