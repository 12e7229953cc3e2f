"""The console against Apache Kafka 4.3.1 (one KRaft node from the jars `make java-deps`
caches, the admin tests' fixture): every page loads with no error, a topic created through the
page is in Metadata, its messages are browsed, a consumer group's lag is shown and the ACLs
page lists an ACL, so the console holds to the Kafka protocol, not to Samsa."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from samsa.broker.admin.client import Admin, Settings
from tests.admin.test_kafka_sample import kafka
from tests.console.conftest import ConsoleServer, serving

__all__ = ["kafka"]  # the Apache Kafka fixture, used by name
pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def console(kafka: str) -> Iterator[ConsoleServer]:
    with serving({"bootstrap.servers": kafka}) as found:
        yield found


def no_error(page: Any, path: str) -> None:
    response = page.goto(path)
    assert response.status == 200 and page.locator("#error").count() == 0, page.content()


def test_every_page_against_apache_kafka(console: ConsoleServer, kafka: str, page: Any,
                                        shots: Any) -> None:
    topic, group = f"console-{uuid.uuid4().hex[:8]}", f"console-g-{uuid.uuid4().hex[:8]}"
    no_error(page, console.url + "/")
    assert page.locator("#brokers tbody tr").first.locator("td").nth(4).inner_text() == "up"
    shots(page, "kafka-brokers")

    no_error(page, console.url + "/topics")
    page.locator("#create-topic input[name=name]").fill(topic)
    page.locator("#create-topic input[name=partitions]").fill("2")
    page.locator("#create-topic button[type=submit]").click()
    page.wait_for_url(f"**/topics/{topic}")
    assert page.locator("#partitions tbody tr").count() == 2
    with Admin(Settings({"bootstrap.servers": kafka})) as admin:
        assert len(admin.metadata([topic]).topics[0].partitions) == 2

    p = Producer({"bootstrap.servers": kafka})
    for i in range(4):
        p.produce(topic, key=b"k", value=f"v{i}".encode(), partition=0)
    assert p.flush(30) == 0
    no_error(page, f"{console.url}/topics/{topic}/messages?partition=0&offset=0")
    values = page.locator("#messages tbody tr td:nth-child(4)").all_inner_texts()
    assert values == ["v0", "v1", "v2", "v3"]

    c = Consumer({"bootstrap.servers": kafka, "group.id": group})
    c.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
    c.close()
    no_error(page, console.url + "/groups")
    offsets = page.locator(f'section[data-group="{group}"] table').nth(1)
    row = offsets.locator("tbody tr", has_text=topic).first.locator("td").all_inner_texts()
    assert row[1:5] == ["0", "1", "4", "3"]
    shots(page, "kafka-groups")

    acl = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice", "*",
                     AclOperation.READ, AclPermissionType.ALLOW)
    acl_admin = AdminClient({"bootstrap.servers": kafka})  # kept: its future needs it alive
    acl_admin.create_acls([acl])[acl].result(30)
    no_error(page, console.url + "/security")
    cells = page.locator("#acls tbody tr", has_text=topic).first.locator("td").all_inner_texts()
    assert cells[:7] == ["TOPIC", topic, "LITERAL", "User:alice", "*", "READ", "ALLOW"]
    no_error(page, console.url + "/transactions")
    shots(page, "kafka-transactions")
