"""`samsa console --read-only` in Chromium: the pages offer no change, and a change posted
anyway is answered 403 with nothing sent to the cluster (the broker's request counters, from
its /metrics, do not move; a writable console's same post moves them). The throughput chart
of the brokers page and the topics' rates, fed by the broker's /metrics (`--metrics-url`)."""

from __future__ import annotations

import re
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer

from samsa.broker.admin.client import Admin, Settings
from tests.console.conftest import ConsoleServer, serving, started
from tests.support.broker import BrokerProcess, free_port

METRICS_PORT = free_port()
METRICS_URL = f"http://127.0.0.1:{METRICS_PORT}/metrics"
REFUSED = "The console is read-only: no change was sent to the cluster."
REQUESTS = "kafka_network_requestmetrics_requestspersec_total"


@pytest.fixture(scope="module")
def metered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with started(tmp_path_factory, "console-ro", {"metrics.port": METRICS_PORT}) as found:
        yield found


@pytest.fixture(scope="module")
def consoles(metered: BrokerProcess) -> Iterator[tuple[ConsoleServer, ConsoleServer]]:
    props = {"bootstrap.servers": metered.bootstrap}
    with serving(props, read_only=True) as read_only, serving(
            props, metrics_urls=[METRICS_URL]) as writable:
        yield read_only, writable


def requests_of(api: str) -> float:
    """How many `api` requests the broker has received (all versions)."""
    text = urllib.request.urlopen(METRICS_URL, timeout=10).read().decode()
    pattern = rf'{REQUESTS}\{{request="{api}",[^}}]*\}} (\S+)'
    return sum(float(n) for n in re.findall(pattern, text))


def post(page: Any, path: str, fields: dict[str, str]) -> tuple[int, str]:
    """A form post from the page's own script (what a crafted form would send)."""
    return tuple(page.evaluate("""async ([path, fields]) => {
        const r = await fetch(path, {method: 'POST', body: new URLSearchParams(fields)});
        return [r.status, await r.text()];
    }""", [path, fields]))  # type: ignore[return-value]


def has_topic(bootstrap: str, name: str) -> bool:
    with Admin(Settings({"bootstrap.servers": bootstrap})) as admin:
        return name in {t.name for t in admin.metadata().topics}


def test_read_only_console_refuses_writes(consoles: tuple[ConsoleServer, ConsoleServer],
                                          metered: BrokerProcess, page: Any,
                                          shots: Any) -> None:
    read_only, writable = consoles
    name = f"console-ro-{uuid.uuid4().hex[:8]}"
    page.goto(read_only.url + "/topics")
    assert page.locator("#read-only").is_visible()
    assert page.locator("#create-topic").count() == 0
    shots(page, "read-only-topics")

    writes = ("CreateTopics", "DeleteTopics", "WriteTxnMarkers", "CreateAcls",
              "AlterUserScramCredentials")
    before = [requests_of(api) for api in writes]
    token = read_only.console.csrf  # a post as valid as a writable console's form makes
    status, body = post(page, "/topics", {"name": name, "partitions": "1", "csrf": token})
    assert status == 403 and REFUSED in body
    status, body = post(page, "/transactions/abort", {
        "topic": name, "partition": "0", "producer_id": "1", "producer_epoch": "0",
        "start_offset": "0", "csrf": token})
    assert status == 403 and REFUSED in body
    for path, fields in (("/acls", {"resource_type": "TOPIC", "resource_name": name,
                                    "pattern_type": "LITERAL", "principal": "User:x",
                                    "host": "*", "operation": "READ", "permission": "ALLOW"}),
                         ("/users", {"user": "x", "password": "p",
                                     "mechanism": "SCRAM-SHA-256", "iterations": "4096"}),
                         ("/topics/console-throughput/delete", {})):
        status, body = post(page, path, {**fields, "csrf": token})
        assert status == 403 and REFUSED in body, path
    page.goto(read_only.url + "/security")
    assert page.locator("#set-scram, #create-acl, button").count() == 0
    page.goto(read_only.url + "/transactions/abort?topic=t&partition=0&producer_id=1"
                              "&producer_epoch=0&start_offset=0")
    assert REFUSED in page.locator("#error").inner_text()
    shots(page, "read-only-refused")
    after = [requests_of(api) for api in writes]
    assert after == before and not has_topic(metered.bootstrap, name)

    # the same post to a writable console reaches the cluster
    page.goto(writable.url + "/topics")
    status, _ = post(page, "/topics", {"name": name, "partitions": "1",
                                       "csrf": writable.console.csrf})
    assert status == 200 and has_topic(metered.bootstrap, name)
    assert requests_of("CreateTopics") == before[0] + 1


def test_a_post_without_the_forms_token_is_refused(consoles: tuple[ConsoleServer,
                                                                   ConsoleServer],
                                                   metered: BrokerProcess, page: Any) -> None:
    _, writable = consoles
    name = f"console-csrf-{uuid.uuid4().hex[:8]}"
    page.goto(writable.url + "/topics")
    status, body = post(page, "/topics", {"name": name, "partitions": "1"})
    assert status == 403 and "token" in body
    assert not has_topic(metered.bootstrap, name)


def test_throughput_chart(consoles: tuple[ConsoleServer, ConsoleServer],
                          metered: BrokerProcess, page: Any, shots: Any) -> None:
    _, writable = consoles
    stop = threading.Event()

    def produce() -> None:
        p = Producer({"bootstrap.servers": metered.bootstrap, "linger.ms": 0})
        while not stop.is_set():
            p.produce("console-throughput", value=b"x" * 1000)
            p.poll(0)
            time.sleep(0.02)
        p.flush(10)

    worker = threading.Thread(target=produce, daemon=True)
    worker.start()
    try:
        page.goto(writable.url + "/")
        page.wait_for_function(
            "Number(document.getElementById('bytes-in').textContent) > 0", timeout=30_000)
        assert int(page.locator("#records-in").inner_text()) > 0
        page.wait_for_function(  # three rates: a line of two segments
            "document.getElementById('line-in').getAttribute('points').split(' ').length >= 3",
            timeout=30_000)
        shots(page, "throughput")
        page.goto(writable.url + "/topics")  # each topic's rates in its row
        rate = page.locator('span.rate[data-topic="console-throughput"][data-key="bytes_in"]')
        page.wait_for_function("Number(document.querySelector("
                               "'span.rate[data-topic=\"console-throughput\"]').textContent) > 0",
                               timeout=30_000)
        assert int(rate.inner_text()) > 0
        idle = page.locator('span.rate[data-topic="__consumer_offsets"][data-key="bytes_in"]')
        assert idle.count() == 0 or int(idle.inner_text() or 0) == 0
        shots(page, "topic-rates")
    finally:
        stop.set()
        worker.join(15)
