"""The console of a SASL-secured cluster in Chromium: it asks for the cluster's credentials
(PLAIN or SCRAM), refuses a wrong password with Kafka's error, carries the credentials of the
session to every request (the broker logs who authenticated) and forgets them on log out or
when the session is idle too long."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.console.conftest import ConsoleServer, serving, started_with_sasl
from tests.security.test_sasl import JAAS, _add_scram_user
from tests.support.broker import BrokerProcess


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with started_with_sasl(tmp_path_factory, "console-sasl", {
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS}) as b:
        _add_scram_user(b.bootstrap, "carol", "carol-secret")
        yield b


@pytest.fixture(scope="module")
def console(secured: BrokerProcess) -> Iterator[ConsoleServer]:
    props = {"bootstrap.servers": secured.sasl,  # type: ignore[attr-defined]
             "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}
    with serving(props) as found:
        yield found


def log_in(page: Any, user: str, password: str, mechanism: str) -> None:
    page.locator("#login input[name=username]").fill(user)
    page.locator("#login input[name=password]").fill(password)
    page.locator("#login select[name=mechanism]").select_option(mechanism)
    page.locator("#login button[type=submit]").click()


def test_sasl_login(console: ConsoleServer, secured: BrokerProcess, browser: Any, page: Any,
                    shots: Any) -> None:
    page.goto(console.url + "/topics")
    assert page.url == console.url + "/login"
    shots(page, "login")
    log_in(page, "carol", "wrong", "SCRAM-SHA-256")
    assert "SASL_AUTHENTICATION_FAILED" in page.locator("#error").inner_text()
    assert console.console.sessions == {}

    log_in(page, "carol", "carol-secret", "SCRAM-SHA-256")
    page.wait_for_url(console.url + "/")
    assert page.locator("#user").inner_text().startswith("carol")
    assert page.locator("#brokers tbody tr").first.locator("td").nth(4).inner_text() == "up"
    page.goto(console.url + "/security")
    users = page.locator("#users tbody tr", has_text="carol").locator("td")
    assert "SCRAM-SHA-256 (4096 iterations)" in users.nth(1).inner_text()
    shots(page, "logged-in")
    assert "authenticated as User:carol (SCRAM-SHA-256)" in secured.log_tail(300)

    # another browser has no session: it is asked to log in, and PLAIN works too
    other = browser.new_context().new_page()
    try:
        other.goto(console.url + "/groups")
        assert other.url == console.url + "/login"
        log_in(other, "alice", "alice-secret", "PLAIN")
        other.wait_for_url(console.url + "/")
        assert other.locator("#user").inner_text().startswith("alice")
    finally:
        other.context.close()
    assert "authenticated as User:alice (PLAIN)" in secured.log_tail(300)

    # a session idle longer than the console keeps one is forgotten
    console.console.session_idle_s = 0.5
    time.sleep(1)
    page.goto(console.url + "/topics")
    assert page.url == console.url + "/login"
    console.console.session_idle_s = 3600
    log_in(page, "carol", "carol-secret", "SCRAM-SHA-256")
    page.wait_for_url(console.url + "/")

    page.get_by_role("link", name="log out").click()
    page.wait_for_url(console.url + "/login")
    page.goto(console.url + "/topics")
    assert page.url == console.url + "/login"
