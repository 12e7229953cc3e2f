"""The console's brokers and topics pages in Chromium: a topic created with the page's form
appears in the cluster's Metadata (asked with the admin client, as any Kafka client would),
and its partitions, replicas, ISR and messages are shown."""

from __future__ import annotations

from typing import Any

from confluent_kafka import Producer

from samsa.broker.admin.client import Admin, Settings
from tests.console.conftest import ConsoleServer
from tests.support.broker import BrokerProcess


def metadata_topics(bootstrap: str) -> dict[str, Any]:
    with Admin(Settings({"bootstrap.servers": bootstrap})) as admin:
        return {t.name: t for t in admin.metadata().topics}


def test_brokers_page(console: ConsoleServer, cluster: BrokerProcess, page: Any,
                      shots: Any) -> None:
    page.goto(console.url + "/")
    row = page.locator("#brokers tbody tr")
    assert row.count() == 1
    cells = row.first.locator("td").all_inner_texts()
    assert cells[0] == "0" and cells[1] == cluster.bootstrap and cells[4] == "up"
    assert page.locator("#cluster-id").inner_text()
    shots(page, "brokers")


def test_topic_created_through_the_page_is_in_metadata(console: ConsoleServer,
                                                       cluster: BrokerProcess, page: Any,
                                                       shots: Any, unique_topic: str) -> None:
    assert unique_topic not in metadata_topics(cluster.bootstrap)
    page.goto(console.url + "/topics")
    form = page.locator("#create-topic")
    form.locator("input[name=name]").fill(unique_topic)
    form.locator("input[name=partitions]").fill("3")
    form.locator("input[name=configs]").fill("retention.ms=3600000")
    shots(page, "create-form")
    form.locator("button[type=submit]").click()
    page.wait_for_url(f"**/topics/{unique_topic}")
    shots(page, "created")

    t = metadata_topics(cluster.bootstrap)[unique_topic]
    assert t.error_code == 0 and len(t.partitions) == 3
    rows = page.locator("#partitions tbody tr")
    assert rows.count() == 3
    first = rows.first.locator("td").all_inner_texts()
    assert first[:4] == ["0", "0", "0", "0"]  # partition, leader, replicas, ISR

    page.goto(console.url + "/topics")
    listed = page.locator("#topics tbody tr", has_text=unique_topic).locator("td")
    assert listed.all_inner_texts()[1] == "3"


def test_creating_an_existing_topic_shows_kafkas_error(console: ConsoleServer, page: Any,
                                                       unique_topic: str) -> None:
    for _ in range(2):
        page.goto(console.url + "/topics")
        page.locator("#create-topic input[name=name]").fill(unique_topic)
        page.locator("#create-topic button[type=submit]").click()
    assert "TOPIC_ALREADY_EXISTS" in page.locator("#error").inner_text()


def test_messages_browsed_as_text_json_and_hex(console: ConsoleServer, cluster: BrokerProcess,
                                                page: Any, shots: Any,
                                                unique_topic: str) -> None:
    p = Producer({"bootstrap.servers": cluster.bootstrap})
    for i in range(5):
        p.produce(unique_topic, key=f"k{i}".encode(), value=f'{{"n": {i}}}'.encode(),
                  headers=[("h", b"v")], partition=0)
    assert p.flush(20) == 0
    page.goto(f"{console.url}/topics/{unique_topic}/messages?partition=0&limit=3&format=json")
    rows = page.locator("#messages tbody tr")
    assert rows.count() == 3
    assert [rows.nth(i).locator("td").first.inner_text() for i in range(3)] == ["2", "3", "4"]
    assert rows.first.locator("td").nth(3).inner_text() == '{\n  "n": 2\n}'
    assert rows.first.locator("td").nth(4).inner_text() == "h=v"
    shots(page, "messages-json")
    page.get_by_role("link", name="hex").click()
    assert rows.first.locator("td").nth(2).inner_text() == "6b 32"  # "k2"
    page.goto(f"{console.url}/topics/{unique_topic}/messages?partition=0&offset=0&limit=2")
    assert page.locator("#messages tbody tr").first.locator("td").nth(3).inner_text() == (
        '{"n": 0}')


def test_a_topic_that_does_not_exist_is_404(console: ConsoleServer, page: Any) -> None:
    response = page.goto(console.url + "/topics/no-such-topic-here")
    assert response.status == 404
    assert "UNKNOWN_TOPIC_OR_PARTITION" in page.locator("#error").inner_text()


def test_record_contents_are_shown_as_text_not_run(console: ConsoleServer,
                                                  cluster: BrokerProcess, page: Any,
                                                  unique_topic: str) -> None:
    script = "<script>window.ran = true</script><b>bold</b>"
    p = Producer({"bootstrap.servers": cluster.bootstrap})
    p.produce(unique_topic, key=script.encode(), value=script.encode(),
              headers=[("<i>h</i>", b"<u>v</u>")], partition=0)
    assert p.flush(20) == 0
    page.goto(f"{console.url}/topics/{unique_topic}/messages?partition=0")
    cells = page.locator("#messages tbody tr").first.locator("td")
    assert cells.nth(2).inner_text() == script and cells.nth(3).inner_text() == script
    assert cells.nth(4).inner_text() == "<i>h</i>=<u>v</u>"
    assert page.evaluate("window.ran") is None
    assert page.locator("#messages b, #messages i, #messages u").count() == 0


def test_messages_of_a_partition_that_does_not_exist_is_404(console: ConsoleServer,
                                                           page: Any, unique_topic: str) -> None:
    page.goto(console.url + "/topics")
    page.locator("#create-topic input[name=name]").fill(unique_topic)
    page.locator("#create-topic button[type=submit]").click()
    page.wait_for_url(f"**/topics/{unique_topic}")
    response = page.goto(f"{console.url}/topics/{unique_topic}/messages?partition=7")
    assert response.status == 404
    assert f"{unique_topic} has no partition 7" in page.locator("#error").inner_text()


def test_topic_deleted_from_its_page_after_confirmation(console: ConsoleServer,
                                                       cluster: BrokerProcess, page: Any,
                                                       unique_topic: str) -> None:
    page.goto(console.url + "/topics")
    page.locator("#create-topic input[name=name]").fill(unique_topic)
    page.locator("#create-topic button[type=submit]").click()
    page.wait_for_url(f"**/topics/{unique_topic}")
    page.once("dialog", lambda dialog: dialog.dismiss())
    page.get_by_role("button", name="Delete topic").click()
    assert unique_topic in metadata_topics(cluster.bootstrap)
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete topic").click()
    page.wait_for_url(console.url + "/topics")
    assert unique_topic not in metadata_topics(cluster.bootstrap)
    assert page.locator("#topics tbody tr", has_text=unique_topic).count() == 0
