"""Share groups (KIP-932) at the wire level: a new cluster finalizes share.version 1 (as Kafka
4.3 does), which gates ShareGroupHeartbeat, ShareGroupDescribe and the other share APIs, a
downgrade to 0 turns them off, and the simple assignor lets several members share one
partition (tests/protocol/wire.py)."""

from __future__ import annotations

import time
import uuid

from tests.groups.clients import FAST
from tests.protocol.wire import WireClient

FIND, LIST, API_VERSIONS, UPDATE_FEATURES = 10, 16, 18, 57
SHARE_HEARTBEAT, SHARE_DESCRIBE = 76, 77
# ShareGroupHeartbeat/Describe, ShareFetch, ShareAcknowledge, the persister APIs, the offsets
SHARE_APIS = {76, 77, 78, 79, 83, 84, 85, 86, 87, 90, 91, 92}
NONE, UNKNOWN_MEMBER_ID, UNSUPPORTED_VERSION, INVALID_UPDATE_VERSION = 0, 25, 35, 95
UPGRADE, SAFE_DOWNGRADE = 1, 2
INCONSISTENT_GROUP_PROTOCOL, NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND = 23, 68, 69
DELETE_GROUPS = 42


def _api_versions(w):
    return w.call(API_VERSIONS, 4, {"client_software_name": "t", "client_software_version": "1"})


def _advertised(w):
    return {k.api_key for k in _api_versions(w).api_keys}


def _finalize_share(w, level, upgrade_type=UPGRADE):
    return w.call(UPDATE_FEATURES, 1, {"feature_updates": [
        {"feature": "share.version", "max_version_level": level,
         "upgrade_type": upgrade_type}], "validate_only": False})


def _hb(w, group, member, epoch, topics=("t",)):
    return w.call(SHARE_HEARTBEAT, 1, {
        "group_id": group, "member_id": member, "member_epoch": epoch, "rack_id": None,
        "subscribed_topic_names": list(topics) if topics is not None else None})


def _delete(w, group):
    return w.call(DELETE_GROUPS, 2, {"groups_names": [group]}).results[0].error_code


def _parts(r):
    return {(tp.topic_id, p) for tp in r.assignment.topic_partitions for p in tp.partitions}


def test_a_new_broker_serves_share_groups_until_share_version_is_downgraded(broker_factory):
    """No setting needed: share.version 0-1 supported and 1 finalized (Kafka 4.3's default);
    `kafka-features downgrade --feature share.version=0` turns the share APIs off, `upgrade`
    back on."""
    b = broker_factory(settings=FAST)
    with WireClient(b.bootstrap) as w:
        r = _api_versions(w)
        assert ("share.version", 0, 1) in {
            (f.name, f.min_version, f.max_version) for f in r.supported_features}
        assert ("share.version", 1) in {
            (f.name, f.max_version_level) for f in r.finalized_features}
        assert SHARE_APIS <= {k.api_key for k in r.api_keys}
        assert w.call(FIND, 3, {"key": "sg", "key_type": 0}).error_code == NONE
        m = uuid.uuid4().hex
        r = _hb(w, "sg", m, 0)
        assert r.error_code == NONE and r.member_id == m, r

        assert _finalize_share(w, 2).error_code == INVALID_UPDATE_VERSION
        assert _finalize_share(w, 0).error_code == INVALID_UPDATE_VERSION  # not an UPGRADE
        assert _finalize_share(w, 0, SAFE_DOWNGRADE).error_code == NONE
        r = _api_versions(w)
        assert not SHARE_APIS & {k.api_key for k in r.api_keys}
        assert "share.version" not in {f.name for f in r.finalized_features}
        assert _hb(w, "sg", uuid.uuid4().hex, 0).error_code == UNSUPPORTED_VERSION
        describe = {"group_ids": ["sg"], "include_authorized_operations": False}
        assert w.call(SHARE_DESCRIBE, 1, describe).groups[0].error_code == UNSUPPORTED_VERSION

        assert _finalize_share(w, 1).error_code == NONE
        assert SHARE_APIS <= _advertised(w)
        r = _hb(w, "sg", uuid.uuid4().hex, 0)
        assert r.error_code == NONE, r


def test_members_share_one_partition(broker_factory):
    b = broker_factory(settings=FAST)
    with WireClient(b.bootstrap) as w:
        r = w.call(19, 7, {"topics": [{"name": "t", "num_partitions": 1,
                                       "replication_factor": 1, "assignments": [],
                                       "configs": []}],
                           "timeout_ms": 10_000, "validate_only": False})
        assert r.topics[0].error_code == NONE, r
        tid = r.topics[0].topic_id
        assert w.call(FIND, 3, {"key": "sg", "key_type": 0}).error_code == NONE

        members = [uuid.uuid4().hex for _ in range(3)]
        epochs = []
        for m in members:
            r = _hb(w, "sg", m, 0)
            assert r.error_code == NONE and r.member_id == m, r
            assert _parts(r) == {(tid, 0)}  # every member gets the one partition
            epochs.append(r.member_epoch)
        assert epochs == sorted(set(epochs)), epochs  # each join moved the group epoch
        assert _hb(w, "sg", "stranger", 5).error_code == UNKNOWN_MEMBER_ID
        # the id is taken by a share group: no classic or consumer-protocol member joins it
        r = w.call(11, 5, {"group_id": "sg", "session_timeout": 10_000,
                           "rebalance_timeout": 10_000, "member_id": "",
                           "group_instance_id": None, "protocol_type": "consumer",
                           "protocols": [{"name": "range", "metadata": b""}]})
        assert r.error_code == INCONSISTENT_GROUP_PROTOCOL, r
        r = w.call(68, 1, {"group_id": "sg", "member_id": uuid.uuid4().hex, "member_epoch": 0,
                           "instance_id": None, "rack_id": None, "rebalance_timeout": 30_000,
                           "subscribed_topic_names": ["t"], "subscribed_topic_regex": None,
                           "server_assignor": None, "topic_partitions": []})
        assert r.error_code == GROUP_ID_NOT_FOUND, r

        d = w.call(SHARE_DESCRIBE, 1, {"group_ids": ["sg", "nope"],
                                       "include_authorized_operations": False}).groups
        assert d[0].error_code == NONE and d[0].group_state == "Stable", d
        assert d[0].assignor_name == "simple" and d[0].group_epoch == epochs[-1]
        assert sorted(m.member_id for m in d[0].members) == sorted(members)
        assert all(list(m.assignment.topic_partitions[0].partitions) == [0] for m in d[0].members)
        assert d[1].error_code != NONE

        r = _hb(w, "sg", members[0], -1)
        assert r.error_code == NONE and r.member_epoch == -1, r
        d = w.call(SHARE_DESCRIBE, 1, {"group_ids": ["sg"],
                                       "include_authorized_operations": False}).groups[0]
        assert sorted(m.member_id for m in d.members) == sorted(members[1:])
        listed = w.call(LIST, 5, {"states_filter": [], "types_filter": ["share"]}).groups
        assert [(g.group_id, g.group_type) for g in listed] == [("sg", "share")]


def test_silent_member_leaves_after_the_session_timeout(broker_factory):
    b = broker_factory(settings={**FAST, "group.share.session.timeout.ms": 1500})
    with WireClient(b.bootstrap) as w:
        assert w.call(FIND, 3, {"key": "sg", "key_type": 0}).error_code == NONE
        m = uuid.uuid4().hex
        assert _hb(w, "sg", m, 0).error_code == NONE
        describe = {"group_ids": ["sg"], "include_authorized_operations": False}
        assert w.call(SHARE_DESCRIBE, 1, describe).groups[0].group_state == "Stable"
        assert _delete(w, "sg") == NON_EMPTY_GROUP
        deadline = time.monotonic() + 10  # the 1.5 s session, and a slow machine's stall
        while (d := w.call(SHARE_DESCRIBE, 1, describe).groups[0]).members:
            assert time.monotonic() < deadline, d
            time.sleep(0.2)
        assert d.group_state == "Empty", d
        assert _hb(w, "sg", m, 1, topics=None).error_code == UNKNOWN_MEMBER_ID
        assert _delete(w, "sg") == NONE
        assert w.call(SHARE_DESCRIBE, 1, describe).groups[0].error_code == GROUP_ID_NOT_FOUND
