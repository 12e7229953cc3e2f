"""The console's groups page in Chromium with a streams group (KIP-1071) on a broker that
serves StreamsGroupDescribe: listed with its type, state and member, the source partitions of
the member's active tasks as its assignment, and the lag rows; not an error row."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from samsa.broker.admin import topics as admin_topics
from samsa.broker.admin.client import Admin, Settings
from tests.admin.test_streams_groups import STREAMS, streams_member
from tests.console.conftest import ConsoleServer, started
from tests.support.broker import BrokerProcess


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with started(tmp_path_factory, "console-streams", STREAMS) as b:
        yield b


def test_streams_group_on_the_page(console: ConsoleServer, cluster: BrokerProcess, page: Any,
                                   shots: Any) -> None:
    app, source = f"app-{uuid.uuid4().hex[:8]}", f"events-{uuid.uuid4().hex[:8]}"
    with Admin(Settings({"bootstrap.servers": cluster.bootstrap})) as admin:
        admin_topics.create(admin, source, 2, 1, {})
        member = streams_member(admin, app, source)
    page.goto(console.url + "/groups")
    cells = page.locator("#groups tbody tr", has_text=app).locator("td").all_inner_texts()
    assert cells[1:4] == ["streams", "streams", "Stable"] and cells[5] == "1", cells
    section = page.locator(f'section[data-group="{app}"]')
    assert section.locator(".bad").count() == 0
    row = section.locator("table").first.locator("tbody tr td").all_inner_texts()
    assert row[0] == member["member_id"] and row[3] == str(member["epoch"])
    assert row[4] == f"{app}-rekey-repartition: 0, 1; {source}: 0, 1"
    offsets = section.locator("table").nth(1).locator("tbody tr")
    assert offsets.count() == 4  # both partitions of the source and the repartition topic
    shots(page, "groups-streams")
