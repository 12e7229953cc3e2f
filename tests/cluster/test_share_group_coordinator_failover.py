"""A share group (KIP-932) survives a kill -9 of its group coordinator: the next leader of its
`__consumer_offsets` partition replays the group's records, so the members heartbeat on at
their epochs with their assignments (not GROUP_ID_NOT_FOUND, fatal to the Java client) and
read on from the partition's leader."""

from __future__ import annotations

import time
import uuid

import pytest

from tests.cluster.cluster import GROUP_KEY, Cluster, wait_until
from tests.cluster.test_share_group_failover import (
    SETTINGS,
    _acquired,
    _configure_group,
    _coordinator,
    _setup,
)
from tests.protocol.wire import WireClient

pytestmark = pytest.mark.timeout(150)
SHARE_HEARTBEAT, SHARE_DESCRIBE, SHARE_FETCH = 76, 77, 78
RETRIABLE = {14, 15, 16}  # load in progress, coordinator not available, not coordinator


def _hb(w: WireClient, group: str, member: str, epoch: int, topic: str):
    return w.call(SHARE_HEARTBEAT, 1, {
        "group_id": group, "member_id": member, "member_epoch": epoch, "rack_id": None,
        "subscribed_topic_names": [topic] if epoch == 0 else None})


def _fetch(w: WireClient, group: str, member: str, tid: uuid.UUID, epoch: int) -> list[int]:
    r = w.call(SHARE_FETCH, 1, {
        "group_id": group, "member_id": member, "share_session_epoch": epoch, "max_wait": 500,
        "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 10, "batch_size": 10,
        "forgotten_topics_data": [], "topics": [{"topic_id": tid, "partitions": [
            {"partition_index": 0, "acknowledgement_batches": []}]}]})
    assert r.error_code == 0, r
    assert r.responses[0].partitions[0].error_code == 0, r
    return [o for o, _ in _acquired(r)]


def test_share_group_survives_group_coordinator_kill9(zookeeper, tmp_path):
    cluster = Cluster(zookeeper, tmp_path, **SETTINGS).start()
    conns: list[WireClient] = []
    try:
        topic, group, tid = _setup(cluster, 60)
        leader = cluster.leaders(topic)[0]
        while (coordinator := _coordinator(cluster, GROUP_KEY, group)) == leader:
            group = f"sg-{uuid.uuid4().hex[:6]}"
            _configure_group(cluster, group)
        members = [uuid.uuid4().hex, uuid.uuid4().hex]
        with WireClient(cluster.broker(coordinator).bootstrap) as w:
            joins = []
            for m in members:  # (the offsets partition's leader may be just elected)
                wait_until(lambda m=m: _hb(w, group, m, 0, topic).error_code not in RETRIABLE,
                           20, "a loaded coordinator")
                joined = _hb(w, group, m, 0, topic)
                assert joined.error_code == 0, joined
                joins.append(joined.member_epoch)
            epoch = joins[1]  # the first member takes the second one's epoch
            r = _hb(w, group, members[0], joins[0], topic)
            assert (r.error_code, r.member_epoch) == (0, epoch), r
        conns = [WireClient(cluster.broker(leader).bootstrap) for _ in members]
        for m, c in zip(members, conns, strict=True):
            assert _fetch(c, group, m, tid, 0)

        cluster.broker(coordinator).kill9()
        deadline = time.monotonic() + 60
        while True:
            assert time.monotonic() < deadline, cluster.logs_tail()
            new = _coordinator(cluster, GROUP_KEY, group)
            if new == coordinator:
                time.sleep(0.2)
                continue
            with WireClient(cluster.broker(new).bootstrap) as w:
                r = _hb(w, group, members[0], epoch, topic)
                if r.error_code in RETRIABLE:
                    time.sleep(0.2)
                    continue
                for m in members:
                    r = _hb(w, group, m, epoch, topic)
                    assert (r.error_code, r.member_epoch, r.assignment) == (0, epoch, None), r
                d = w.call(SHARE_DESCRIBE, 1, {"group_ids": [group],
                                               "include_authorized_operations": False})
                g = d.groups[0]
                assert (g.error_code, g.group_state, g.group_epoch) == (0, "Stable", epoch), g
                assert sorted((m.member_id, m.member_epoch, m.subscribed_topic_names,
                               [(t.topic_id, t.partitions) for t in m.assignment.topic_partitions])
                              for m in g.members) == sorted(
                    (m, epoch, (topic,), [(tid, (0,))]) for m in members), g
            break
        got: list[int] = []
        wait_until(lambda: bool(got.extend(_fetch(conns[0], group, members[0], tid, 1)) or got),
                   10, "records after the failover")
        assert _fetch(conns[1], group, members[1], tid, 1)
    finally:
        for c in conns:
            c.close()
        cluster.close()
