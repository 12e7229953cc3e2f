"""A consumer-protocol (KIP-848) group survives its coordinator's death: the new leader of its
`__consumer_offsets` partition loads the group's records and the members carry on at their
epochs, with the same assignment."""

from __future__ import annotations

import time
import uuid

import pytest

from tests.cluster.cluster import GROUP_KEY, create_topic, find_coordinators
from tests.protocol.wire import WireClient

pytestmark = pytest.mark.timeout(180)
HEARTBEAT, CG_DESCRIBE = 68, 69
RETRIABLE = {14, 15, 16}  # load in progress, coordinator not available, not coordinator


def _hb(w, group, member, epoch, owned):
    return w.call(HEARTBEAT, 1, {
        "group_id": group, "member_id": member, "member_epoch": epoch,
        "rebalance_timeout": 30_000 if epoch == 0 else -1,
        "subscribed_topic_names": ["t"] if epoch == 0 else None,
        "subscribed_topic_regex": None, "server_assignor": None,
        "topic_partitions": [{"topic_id": t, "partitions": list(ps)} for t, ps in owned]})


def _owned(r):
    return [(tp.topic_id, tp.partitions) for tp in r.assignment.topic_partitions]


def test_consumer_group_survives_coordinator_kill9(zookeeper, tmp_path):
    from tests.cluster.cluster import Cluster

    cluster = Cluster(zookeeper, tmp_path, **{"offsets.topic.replication.factor": 3,
                                              "offsets.topic.num.partitions": 1}).start()
    try:
        create_topic(cluster, "t", 4)
        g = f"cgf-{uuid.uuid4().hex[:8]}"
        coordinator = find_coordinators(cluster, GROUP_KEY, [g])[g]
        m1, m2 = uuid.uuid4().hex, uuid.uuid4().hex
        with WireClient(cluster.broker(coordinator).bootstrap) as w:
            r1 = _hb(w, g, m1, 0, [])
            r2 = _hb(w, g, m2, 0, [])
            r1 = _hb(w, g, m1, 1, _owned(r1))  # m1 is asked to revoke two partitions
            r1b = _hb(w, g, m1, 1, _owned(r1))  # revoked: epoch 2
            r2 = _hb(w, g, m2, 2, [])  # gets them
            assert (r1b.member_epoch, r2.member_epoch) == (2, 2), (r1b, r2)
            before = {m1: _owned(r1), m2: _owned(r2)}
        cluster.broker(coordinator).kill9()
        deadline = time.monotonic() + 60
        while True:
            assert time.monotonic() < deadline, cluster.logs_tail()
            try:
                new = find_coordinators(cluster, GROUP_KEY, [g])[g]
            except AssertionError:
                time.sleep(0.2)
                continue
            if new == coordinator:
                time.sleep(0.2)
                continue
            with WireClient(cluster.broker(new).bootstrap) as w:
                d = w.call(CG_DESCRIBE, 1, {"group_ids": [g],
                                            "include_authorized_operations": False}).groups[0]
                if d.error_code in RETRIABLE:
                    time.sleep(0.2)
                    continue
                assert (d.error_code, d.group_epoch, d.assignment_epoch, d.group_state) == (
                    0, 2, 2, "Stable"), d
                for m, owned in before.items():
                    r = _hb(w, g, m, 2, owned)
                    assert (r.error_code, r.member_epoch, r.assignment) == (0, 2, None), r
                break
    finally:
        cluster.close()
