"""The console's transactions page in Chromium: a hanging transaction (an open transaction on
a partition that no coordinator will finish) is found as `kafka-transactions.sh find-hanging`
finds one, and aborted from the page behind a confirmation; a live transaction beside it is
shown open, not hanging, and left alone.

The hanging one is made by a producer process that writes a transactional batch (an hour old)
with a producer id its coordinator does not know (partition verification off, as a buggy or
pre-KIP-890 client could) and is then killed without ending it.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.console.conftest import ConsoleServer, serving, started
from tests.support.broker import BrokerProcess
from tests.transactions.clients import create_topic, open_transaction, unique
from tests.transactions.txnwire import TxnWire

REPO = Path(__file__).resolve().parents[2]
# A producer that leaves a transaction open on partition 0 and waits to be killed.
GHOST = """
import sys, time
from samsa.protocol.records import build_batch
from tests.transactions.txnwire import TxnWire
bootstrap, topic = sys.argv[1:3]
w = TxnWire(bootstrap)
init = w.init_pid(None)
hour_ago = int(time.time() * 1000) - 3_600_000
batch = build_batch([(None, b"ghost", [], hour_ago)], producer_id=init.producer_id,
                    producer_epoch=init.producer_epoch, base_sequence=0, transactional=True)
assert w.produce(topic, 0, batch, txn_id=None) == (0, 0)
print(init.producer_id, init.producer_epoch, flush=True)
time.sleep(600)
"""


@pytest.fixture(scope="module")
def txn_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with started(tmp_path_factory, "console-txn",
                 {"transaction.partition.verification.enable": False}) as found:
        yield found


@pytest.fixture(scope="module")
def console(txn_cluster: BrokerProcess) -> Iterator[ConsoleServer]:
    with serving({"bootstrap.servers": txn_cluster.bootstrap}) as found:
        yield found


def killed_ghost(bootstrap: str, topic: str) -> tuple[int, int]:
    proc = subprocess.Popen([sys.executable, "-c", GHOST, bootstrap, topic], cwd=REPO,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        pid, epoch = proc.stdout.readline().split()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    return int(pid), int(epoch)


def open_rows(page: Any) -> list[list[str]]:
    return [r.locator("td").all_inner_texts()
            for r in page.locator("#open-transactions tbody tr").all()]


def test_hanging_transaction_found_and_aborted(console: ConsoleServer,
                                               txn_cluster: BrokerProcess, page: Any,
                                               shots: Any) -> None:
    bs = txn_cluster.bootstrap
    topic, txn_id = unique("console-hanging")
    create_topic(bs, topic, partitions=2)
    live = open_transaction(bs, txn_id, topic, 1)
    pid, epoch = killed_ghost(bs, topic)

    page.goto(console.url + "/transactions")
    shots(page, "found")
    txns = page.locator("#transactions tbody tr", has_text=txn_id).locator("td")
    assert txns.nth(3).inner_text() == "Ongoing"
    assert txns.nth(7).inner_text() == f"{topic}-1"
    rows = {(r[0], r[1]): r for r in open_rows(page) if r[0] == topic}
    assert set(rows) == {(topic, "0"), (topic, "1")}
    ghost, alive = rows[(topic, "0")], rows[(topic, "1")]
    assert ghost[2:4] == [str(pid), str(epoch)] and ghost[9] == "hanging"
    assert ghost[7] == "60.0"  # minutes since its last record
    assert alive[8] == txn_id and alive[9] == "open" and alive[10] == ""

    # with no age limit the live one is a candidate too, but its coordinator knows it
    page.locator("input[name=max_minutes]").fill("0")
    page.get_by_role("button", name="Look").click()
    statuses = {r[1]: r[9] for r in open_rows(page) if r[0] == topic}
    assert statuses == {"0": "hanging", "1": "open"}

    page.locator("#open-transactions tbody tr", has_text="hanging").get_by_role(
        "link", name="abort…").click()
    assert f"producer {pid} (epoch {epoch}) on {topic}-0" in page.locator(
        "#confirm-text").inner_text()
    shots(page, "confirm")
    page.get_by_role("button", name="Abort the transaction").click()
    page.wait_for_url("**/transactions?aborted=*")
    shots(page, "aborted")
    assert [r[1] for r in open_rows(page) if r[0] == topic] == ["1"]
    with TxnWire(bs) as w:
        part = w.fetch(topic, 0, 0, 1)
        assert part.last_stable_offset == part.high_watermark == 2  # record + abort marker

    # the partition's page shows the aborted record, and not its abort marker; committed
    # records only, it shows none
    page.goto(f"{console.url}/topics/{topic}/messages?partition=0&offset=0")
    values = page.locator("#messages tbody tr td:nth-child(4)")
    assert values.all_inner_texts() == ["ghost"]
    page.get_by_role("link", name="committed only").click()
    page.wait_for_url("**isolation=read_committed**")
    assert values.all_inner_texts() == []

    # partition 1: the live transaction's record is committed only once it commits
    page.goto(f"{console.url}/topics/{topic}/messages?partition=1&offset=0"
              "&isolation=read_committed")
    assert values.all_inner_texts() == []
    live.commit_transaction(20)
    page.reload()
    assert values.all_inner_texts() == ["live"]
    page.goto(console.url + "/transactions")
    assert [r for r in open_rows(page) if r[0] == topic] == []
