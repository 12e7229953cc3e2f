"""The console's groups page in Chromium: a classic and a KIP-848 consumer group joined by
librdkafka, their members and assignments, and each partition's lag as
`kafka-consumer-groups.sh --describe` (Kafka's ConsumerGroupCommand) reports it; a share group
(KIP-932) with its member and assignment."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, ShareConsumer, TopicPartition

from samsa.broker.admin import topics as admin_topics
from samsa.broker.admin.client import Admin, Settings
from tests.console.conftest import ConsoleServer
from tests.support.broker import BrokerProcess
from tests.support.java import run_java_tool

GROUPS_CMD = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
COMMITTED = {0: 3, 1: 7, 2: 10}  # of 10 records per partition: lags 7, 3 and 0


@pytest.fixture(scope="module")
def topic(cluster: BrokerProcess) -> str:
    name = f"console-lag-{uuid.uuid4().hex[:8]}"
    with Admin(Settings({"bootstrap.servers": cluster.bootstrap})) as admin:
        admin_topics.create(admin, name, 3, 1, {})
    p = Producer({"bootstrap.servers": cluster.bootstrap})
    for i in range(30):
        p.produce(name, value=f"v{i}".encode(), partition=i % 3)
    assert p.flush(20) == 0
    return name


def joined(bootstrap: str, group: str, topic: str, protocol: str) -> Consumer:
    """A member of `group` that has its assignment and committed COMMITTED."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol,
                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "client.id": f"console-{protocol}"})
    c.subscribe([topic])
    deadline = time.monotonic() + 30
    while not c.assignment() and time.monotonic() < deadline:
        c.poll(0.2)
    assert c.assignment(), "no assignment in 30 s"
    c.commit(offsets=[TopicPartition(topic, p, o) for p, o in COMMITTED.items()],
             asynchronous=False)
    return c


def tool_rows(bootstrap: str, group: str, topic: str) -> dict[int, tuple[str, str, str]]:
    """partition -> (CURRENT-OFFSET, LOG-END-OFFSET, LAG) as kafka-consumer-groups prints."""
    res = run_java_tool(GROUPS_CMD, ["--bootstrap-server", bootstrap, "--describe",
                                     "--group", group], timeout=120)
    assert res.returncode == 0 and not res.timed_out, res.describe()
    rows = [line.split() for line in res.stdout.splitlines() if line.split()[1:2] == [topic]]
    return {int(r[2]): (r[3], r[4], r[5]) for r in rows}


def page_rows(page: Any, group: str) -> dict[int, tuple[str, str, str]]:
    table = page.locator(f'section[data-group="{group}"] table').nth(1)
    out = {}
    for row in table.locator("tbody tr").all():
        cells = row.locator("td").all_inner_texts()
        out[int(cells[1])] = (cells[2], cells[3], cells[4])
    return out


@pytest.mark.parametrize("protocol,kind", [("classic", "classic"), ("consumer", "consumer")])
def test_group_lag_matches_kafka_consumer_groups(console: ConsoleServer, cluster: BrokerProcess,
                                                 topic: str, page: Any, shots: Any,
                                                 protocol: str, kind: str) -> None:
    group = f"console-{protocol}-{uuid.uuid4().hex[:8]}"
    member = joined(cluster.bootstrap, group, topic, protocol)
    try:
        page.goto(console.url + "/groups")
        summary = page.locator("#groups tbody tr", has_text=group).locator("td")
        cells = summary.all_inner_texts()
        assert cells[1] == kind and cells[3] == "Stable" and cells[5] == "1", cells
        assert cells[6] == "10"  # total lag
        section = page.locator(f'section[data-group="{group}"]')
        members = section.locator("table").first.locator("tbody tr")
        assert members.count() == 1
        assert members.first.locator("td").nth(1).inner_text() == f"console-{protocol}"
        assert members.first.locator("td").nth(4).inner_text() == f"{topic}: 0, 1, 2"
        shots(page, f"groups-{protocol}")

        on_page = page_rows(page, group)
        assert on_page == {p: (str(o), "10", str(10 - o)) for p, o in COMMITTED.items()}
        assert tool_rows(cluster.bootstrap, group, topic) == on_page
    finally:
        member.close()


def test_share_group_on_the_page(console: ConsoleServer, cluster: BrokerProcess, topic: str,
                                 page: Any, shots: Any) -> None:
    group = f"console-share-{uuid.uuid4().hex[:8]}"
    share = ShareConsumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                           "client.id": "console-share"})
    try:
        share.subscribe([topic])
        deadline = time.monotonic() + 30
        while True:
            share.poll(0.2)
            page.goto(console.url + "/groups")
            cells = page.locator("#groups tbody tr", has_text=group).locator("td")
            if cells.count() and cells.nth(3).inner_text() == "Stable":
                break
            assert time.monotonic() < deadline, "the share group is not Stable in 30 s"
        assert cells.nth(1).inner_text() == "share" and cells.nth(2).inner_text() == "share"
        member = page.locator(f'section[data-group="{group}"] table').first.locator(
            "tbody tr td").all_inner_texts()
        assert member[1] == "console-share" and member[4] == f"{topic}: 0, 1, 2"
        shots(page, "groups-share")
    finally:
        share.close()


def test_groups_page_refreshes_itself(console: ConsoleServer, cluster: BrokerProcess,
                                      topic: str, page: Any) -> None:
    """Ticked, the refresh box reloads the page (and every page after it) until unticked."""
    group = f"console-refresh-{uuid.uuid4().hex[:8]}"
    page.goto(console.url + "/groups")
    page.locator("#auto-refresh").check()
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group})
    c.commit(offsets=[TopicPartition(topic, 0, 4)], asynchronous=False)
    c.close()
    page.locator("#groups tbody tr", has_text=group).wait_for(timeout=20_000)
    page.goto(console.url + "/")
    assert page.locator("#auto-refresh").is_checked()
    page.locator("#auto-refresh").uncheck()
    page.goto(console.url + "/groups")
    assert not page.locator("#auto-refresh").is_checked()
