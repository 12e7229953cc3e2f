"""The console's ACLs & users page in Chromium, on a broker with Kafka's StandardAuthorizer:
an ACL added with the page's form is what DescribeAcls lists, and deleted from its row (after
the browser's confirmation); SCRAM credentials set with the form let the user log in over
SASL, and deleted from the page they no longer do."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from samsa.broker.admin import acls as admin_acls
from samsa.broker.admin import users as admin_users
from samsa.broker.admin.client import Admin, AdminError, Settings
from tests.console.conftest import ConsoleServer, serving, started_with_sasl
from tests.support.broker import BrokerProcess

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with started_with_sasl(tmp_path_factory, "console-acl", {
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "authorizer.class.name": AUTHORIZER, "super.users": "User:ANONYMOUS"}) as found:
        yield found


@pytest.fixture(scope="module")
def console(guarded: BrokerProcess) -> Iterator[ConsoleServer]:
    with serving({"bootstrap.servers": guarded.bootstrap}) as found:
        yield found


def acls_of(bootstrap: str, name: str) -> list[dict[str, Any]]:
    with Admin(Settings({"bootstrap.servers": bootstrap})) as admin:
        return admin_acls.list_acls(admin, admin_acls.Filter(resource_name=name))


def scram_login(broker: BrokerProcess, user: str, password: str) -> None:
    settings = Settings({"bootstrap.servers": broker.sasl,  # type: ignore[attr-defined]
                         "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user,
                         "sasl.password": password})
    with Admin(settings) as admin:
        admin.metadata([])


def test_acl_added_and_deleted_from_the_page(console: ConsoleServer, guarded: BrokerProcess,
                                             page: Any, shots: Any) -> None:
    topic = f"console-acl-{uuid.uuid4().hex[:8]}"
    page.goto(console.url + "/security")
    form = page.locator("#create-acl")
    form.locator("select[name=resource_type]").select_option("TOPIC")
    form.locator("input[name=resource_name]").fill(topic)
    form.locator("select[name=pattern_type]").select_option("PREFIXED")
    form.locator("input[name=principal]").fill("User:alice")
    form.locator("select[name=operation]").select_option("WRITE")
    form.locator("select[name=permission]").select_option("DENY")
    form.get_by_role("button", name="Add ACL").click()
    page.wait_for_url(console.url + "/security")
    expected = {"resource_type": "TOPIC", "resource_name": topic, "pattern_type": "PREFIXED",
                "principal": "User:alice", "host": "*", "operation": "WRITE",
                "permission": "DENY"}
    assert acls_of(guarded.bootstrap, topic) == [expected]
    row = page.locator("#acls tbody tr", has_text=topic)
    assert row.locator("td").all_inner_texts()[:7] == list(expected.values())
    shots(page, "acl-added")

    page.once("dialog", lambda dialog: dialog.dismiss())  # a change of mind: nothing sent
    row.get_by_role("button", name="Delete ACL").click()
    assert acls_of(guarded.bootstrap, topic) == [expected]
    page.once("dialog", lambda dialog: dialog.accept())
    row.get_by_role("button", name="Delete ACL").click()
    page.wait_for_url(console.url + "/security")
    assert acls_of(guarded.bootstrap, topic) == []
    assert page.locator("#acls tbody tr", has_text=topic).count() == 0


def test_scram_user_set_and_deleted_from_the_page(console: ConsoleServer,
                                                  guarded: BrokerProcess, page: Any,
                                                  shots: Any) -> None:
    user = f"dora{uuid.uuid4().hex[:6]}"
    page.goto(console.url + "/security")
    form = page.locator("#set-scram")
    form.locator("input[name=user]").fill(user)
    form.locator("input[name=password]").fill("dora-secret")
    form.locator("select[name=mechanism]").select_option("SCRAM-SHA-512")
    form.locator("input[name=iterations]").fill("8192")
    form.get_by_role("button", name="Set credentials").click()
    page.wait_for_url(console.url + "/security")
    cells = page.locator("#users tbody tr", has_text=user).locator("td").all_inner_texts()
    assert cells[1] == "SCRAM-SHA-512 (8192 iterations)"
    shots(page, "user-set")
    scram_login(guarded, user, "dora-secret")
    with pytest.raises(AdminError, match="SASL_AUTHENTICATION_FAILED"):
        scram_login(guarded, user, "wrong")

    page.once("dialog", lambda dialog: dialog.accept())
    page.locator("#users tbody tr", has_text=user).get_by_role(
        "button", name="Delete SCRAM-SHA-512").click()
    page.wait_for_url(console.url + "/security")
    assert page.locator("#users tbody tr", has_text=user).count() == 0
    with pytest.raises(AdminError, match="SASL_AUTHENTICATION_FAILED"):
        scram_login(guarded, user, "dora-secret")


def test_a_principal_without_rights_sees_brokers_up(guarded: BrokerProcess, page: Any,
                                                    shots: Any) -> None:
    """DescribeLogDirs needs Describe on the cluster: without it a broker is still up, its log
    dirs not described."""
    with Admin(Settings({"bootstrap.servers": guarded.bootstrap})) as admin:
        admin_users.set_scram(admin, "erin", ["SCRAM-SHA-512"], "erin-secret")
    props = {"bootstrap.servers": guarded.sasl,  # type: ignore[attr-defined]
             "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
             "sasl.username": "erin", "sasl.password": "erin-secret"}
    with serving(props) as console:
        page.goto(console.url + "/")
        cells = page.locator("#brokers tbody tr").first.locator("td").all_inner_texts()
        assert cells[4] == "up"
        assert cells[8] == "not described (CLUSTER_AUTHORIZATION_FAILED)"
        shots(page, "brokers-without-rights")
