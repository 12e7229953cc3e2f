"""Issue 20: share-group metrics. One member of a share group accepts, releases and rejects
records over the wire, lets a redelivered record's lock expire at the delivery-count limit, and
each share-partition and share-group metric on the endpoint moves by exactly that."""

from __future__ import annotations

import time
import uuid

import pytest

from tests.groups.test_share_fetch_wire import (
    ACCEPT,
    NONE,
    REJECT,
    RELEASE,
    SHARE,
    _ack,
    _acquired,
    _batch,
    _fetch,
    produce_values,
    setup_share_group,
)
from tests.observability.test_txn_metrics import scrape, value, wait_for
from tests.protocol.wire import WireClient
from tests.support.broker import free_port

pytestmark = pytest.mark.timeout(180)

SPM = "kafka_server_sharepartitionmetrics"
IN_FLIGHT = f"{SPM}_inflightmessagecount"
BATCHES = f"{SPM}_inflightbatchcount"
LOCK_TIMEOUTS = f"{SPM}_acquisitionlocktimeout_total"
ACKS = "kafka_server_sharegroupmetrics_recordacknowledgements_total"
ACQUIRED = "samsa_share_records_acquired_total"
ACQUIRED_BATCHES = "samsa_share_batches_acquired_total"
REDELIVERED = "samsa_share_records_redelivered_total"
AT_LIMIT = "samsa_share_records_archived_delivery_limit_total"
GROUP_COUNT = "kafka_server_group_coordinator_metrics_share_group_count"
MEMBERS = "samsa_share_group_members"


def counter(samples: dict[str, float], name: str, **labels: str) -> float:
    """A labelled counter's value: 0 while it has never been incremented (no sample yet)."""
    found = [v for key, v in samples.items() if key.split("{", 1)[0] == name
             and all(f'{k}="{x}"' in key for k, x in labels.items())]
    assert len(found) <= 1, f"{name} {labels}: {len(found)} samples"
    return found[0] if found else 0.0


def test_share_metrics_follow_acquisitions_acknowledgements_and_lock_timeouts(broker_factory):
    port = free_port()
    b = broker_factory({**SHARE, "metrics.port": port,
                        "group.share.record.lock.duration.ms": 1000,
                        "group.share.delivery.count.limit": 2})
    group, topic, m = "sg-metrics", "share-metrics", uuid.uuid4().hex
    sp = {"group": group, "topic": topic, "partition": "0"}
    with WireClient(b.bootstrap) as w:
        tid = setup_share_group(w, topic, group, [m])
        s = scrape(port)
        assert value(s, GROUP_COUNT, state="Stable") == 1
        assert value(s, GROUP_COUNT, state="Empty") == 0
        assert value(s, MEMBERS, group=group) == 1
        produce_values(b.bootstrap, topic, [f"v{o}" for o in range(5)])

        got = _acquired(_fetch(w, group, m, 0, tid, wait_ms=2000))
        assert got == {o: (f"v{o}", 1) for o in range(5)}
        s = scrape(port)
        assert value(s, IN_FLIGHT, **sp) == 5
        assert value(s, BATCHES, **sp) == 1  # one run, all acquired by the member
        assert counter(s, ACQUIRED, **sp) == 5
        assert counter(s, ACQUIRED_BATCHES, **sp) == 1
        assert counter(s, REDELIVERED, **sp) == 0

        r = _ack(w, group, m, 1, tid, [_batch(0, 4, ACCEPT, ACCEPT, RELEASE, REJECT, ACCEPT)])
        assert r.error_code == NONE and r.responses[0].partitions[0].error_code == NONE, r
        s = scrape(port)
        assert counter(s, ACKS, group=group, ackType="Accept") == 3  # records, not runs
        assert counter(s, ACKS, group=group, ackType="Release") == 1
        assert counter(s, ACKS, group=group, ackType="Reject") == 1
        # offsets 0-1 accepted: the start offset moved past them; 2 available, 3 archived,
        # 4 acknowledged stay in flight, one batch each
        assert value(s, IN_FLIGHT, **sp) == 3
        assert value(s, BATCHES, **sp) == 3
        assert counter(s, LOCK_TIMEOUTS, **sp) == 0
        assert counter(s, AT_LIMIT, **sp) == 0

        # the released record comes back (its second delivery) and its lock expires: at the
        # delivery-count limit it is archived, and nothing is in flight any more
        started = time.monotonic()
        assert _acquired(_fetch(w, group, m, 2, tid, wait_ms=2000)) == {2: ("v2", 2)}
        s = scrape(port)
        assert counter(s, ACQUIRED, **sp) == 6
        assert counter(s, ACQUIRED_BATCHES, **sp) == 2
        assert counter(s, REDELIVERED, **sp) == 1
        s = wait_for(port, lambda s: counter(s, LOCK_TIMEOUTS, **sp) == 1, timeout=10)
        assert time.monotonic() - started >= 1.0
        assert counter(s, AT_LIMIT, **sp) == 1
        assert value(s, IN_FLIGHT, **sp) == 0
        assert value(s, BATCHES, **sp) == 0
        # acknowledgements counted once, never by the lock timeout
        assert counter(s, ACKS, group=group, ackType="Release") == 1
        assert counter(s, ACKS, group=group, ackType="Accept") == 3

        # the member leaves: the group is empty
        r = w.call(76, 1, {"group_id": group, "member_id": m, "member_epoch": -1,
                           "rack_id": None, "subscribed_topic_names": None})
        assert r.error_code == NONE, r
        s = scrape(port)
        assert value(s, GROUP_COUNT, state="Stable") == 0
        assert value(s, GROUP_COUNT, state="Empty") == 1
        assert value(s, MEMBERS, group=group) == 0
