"""Managing virtual keys from the console, in a real browser against a real proxy: the
page shows nothing without the admin key, creates a key (its secret shown once, and
working through the official SDK), lists it with its scope and limits, and revokes it."""

from __future__ import annotations

import openai
import pytest

from tests.conftest import ServerThread, StartProxy, closed_after_test
from tests.console.conftest import KEY, Console, OpenConsole
from tests.orchestrate.conftest import ADMIN

pytestmark = pytest.mark.timeout(600)


@pytest.fixture
def server(start_proxy: StartProxy) -> ServerThread:
    return start_proxy(master_key=KEY, admin_key=ADMIN)


def sdk(server: ServerThread, key: str) -> openai.OpenAI:
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key=key, max_retries=0, timeout=60)
    return closed_after_test(client)


def keys_page(tab: Console, admin: str) -> None:
    tab.open()
    tab.page.wait_for_selector("#trace-list, #no-traces")
    tab.go("#/keys")
    tab.page.wait_for_selector("#key-form")
    tab.page.fill("#keys-admin-key", admin)
    tab.page.click("#keys-open")


def test_keys_need_the_admin_key(console: OpenConsole, server: ServerThread) -> None:
    tab = console(server)
    tab.open()
    tab.page.wait_for_selector("#trace-list, #no-traces")
    tab.go("#/keys")
    tab.page.wait_for_selector("#key-list p")
    assert "Give the admin key" in tab.page.inner_text("#key-list")
    tab.page.fill("#keys-admin-key", KEY)  # the master key manages no keys
    tab.page.click("#keys-open")
    tab.page.wait_for_selector("#key-list .error")
    assert "admin key" in tab.page.inner_text("#key-list .error")
    refused = [e for e in tab.errors if e.startswith("401: ")]
    assert refused == [f"401: {server.url}/v1/toolgraph/keys"]
    assert all(e.startswith("401: ") or "status of 401" in e for e in tab.errors)


def test_a_key_is_created_listed_used_and_revoked(
    console: OpenConsole, server: ServerThread
) -> None:
    tab = console(server)
    tab.page.on("dialog", lambda dialog: dialog.accept())
    keys_page(tab, ADMIN)
    tab.page.wait_for_selector("#no-keys")

    tab.page.fill("#key-name", "analytics")
    tab.page.fill("#key-tools", "evaluate_*, get_weather")
    tab.page.fill("#key-rpm", "60")
    tab.page.click("#key-create")
    tab.page.wait_for_selector("#key-secret")
    secret = tab.page.inner_text("#key-secret")
    assert secret.startswith("tg-")
    row = tab.page.locator("#keys-table tbody tr")
    tab.page.wait_for_selector("#keys-table")
    assert row.count() == 1
    listed = row.inner_text()
    assert "analytics" in listed
    assert f"…{secret[-4:]}" in listed
    assert "tools: evaluate_*, get_weather" in listed
    assert "60 a minute" in listed
    assert secret not in listed  # shown once, in its own box, never in the list
    tab.shot("keys")
    assert len(sdk(server, secret).models.list().data) > 0

    tab.page.click("#keys-table button.revoke")
    tab.page.wait_for_selector("#no-keys")
    with pytest.raises(openai.AuthenticationError):
        sdk(server, secret).models.list()
    assert tab.errors == []
