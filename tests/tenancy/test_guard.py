"""A proxy without a master key refuses what a web page could make the user's browser
send it: a non-JSON body (a CORS "simple request", sent without asking), a foreign
``Host`` (DNS rebinding), a cross-site ``Origin``; and says at start-up that it runs
without a key. The console, same-origin and JSON, still works."""

from __future__ import annotations

import logging
from typing import Any

import httpx
import pytest

from testing.fake_upstream import FakeUpstream
from tests.conftest import ServerThread, StartProxy
from tests.tenancy.conftest import KEY_A, UPSTREAM_KEY

CHAT = "/v1/chat/completions"
ORCHESTRATED = (
    '{"model": "fake-model", "toolgraph": {"mode": "orchestrate"},'
    ' "messages": [{"role": "user", "content": "Evaluate 6*7."}]}'
)
JSON = {"content-type": "application/json"}
MCP_CALL = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "tools/call",
    "params": {"name": "call_tool", "arguments": {"name": "evaluate_expression",
                                                  "arguments": {"expression": "6*7"}}},
}  # fmt: skip
MCP_HEADERS = {"accept": "application/json, text/event-stream", **JSON}


@pytest.fixture
def open_proxy(start_proxy: StartProxy) -> ServerThread:
    """``make run``'s case: on loopback, no master key."""
    return start_proxy(upstream_api_key=UPSTREAM_KEY)


def post(server: ServerThread, path: str, body: str, **headers: str) -> httpx.Response:
    return httpx.post(f"{server.url}{path}", content=body, headers=headers, timeout=30)


def refused(response: httpx.Response, status: int, code: str) -> str:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    assert error["code"] == code
    return str(error["message"])


@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded", None],
)
def test_a_body_not_sent_as_json_is_refused_before_anything_runs(
    open_proxy: ServerThread, upstream: FakeUpstream, content_type: str | None
) -> None:
    headers = {} if content_type is None else {"content-type": content_type}
    response = post(open_proxy, CHAT, ORCHESTRATED, **headers)
    message = refused(response, 415, "unsupported_media_type")
    assert "application/json" in message
    assert upstream.requests == []  # no plan, no tool, nothing spent upstream
    assert post(open_proxy, CHAT, ORCHESTRATED.replace("orchestrate", "passthrough"),
                **JSON).status_code == 200  # fmt: skip


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8000", "127.0.0.1.evil.example"])
def test_a_foreign_host_reads_no_traces_and_calls_no_tool(
    open_proxy: ServerThread, host: str
) -> None:
    traces = httpx.get(f"{open_proxy.url}/v1/toolgraph/traces", headers={"host": host}, timeout=30)
    message = refused(traces, 403, "host_not_allowed")
    assert "allowed_hosts" in message
    called = httpx.post(
        f"{open_proxy.url}/mcp", json=MCP_CALL, headers={**MCP_HEADERS, "host": host}, timeout=30
    )
    refused(called, 403, "host_not_allowed")


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "[::1]"])
def test_the_loopback_names_are_answered(open_proxy: ServerThread, host: str) -> None:
    port = open_proxy.port
    response = httpx.get(
        f"{open_proxy.url}/v1/toolgraph/traces", headers={"host": f"{host}:{port}"}, timeout=30
    )
    assert response.status_code == 200, response.text


def test_a_cross_site_page_is_refused_and_the_proxys_own_origin_is_not(
    open_proxy: ServerThread, upstream: FakeUpstream
) -> None:
    page = {"origin": "https://evil.example", **JSON}
    refused(post(open_proxy, CHAT, ORCHESTRATED, **page), 403, "cross_site_request")
    refused(post(open_proxy, "/mcp", '{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}',
                 **MCP_HEADERS, origin="null"), 403, "cross_site_request")  # fmt: skip
    # a fetch that carries no Origin (a GET), told apart by the browser's Sec-Fetch-Site
    fetched = httpx.get(
        f"{open_proxy.url}/v1/toolgraph/traces",
        headers={"sec-fetch-site": "cross-site", "sec-fetch-mode": "cors"},
        timeout=30,
    )
    refused(fetched, 403, "cross_site_request")
    assert upstream.requests == []

    own = {"origin": open_proxy.url, "sec-fetch-site": "same-origin", **JSON}
    passthrough = ORCHESTRATED.replace("orchestrate", "passthrough")
    assert post(open_proxy, CHAT, passthrough, **own).status_code == 200
    # a link followed from another site opens the console (its page cannot read it)
    link = {"sec-fetch-site": "cross-site", "sec-fetch-mode": "navigate"}
    assert httpx.get(f"{open_proxy.url}/ui", headers=link, timeout=30).status_code == 200


def test_allowed_origins_and_hosts_are_the_operators_to_widen(
    start_proxy: StartProxy,
) -> None:
    server = start_proxy(
        upstream_api_key=UPSTREAM_KEY,
        allowed_origins=["https://app.example"],
        allowed_hosts=["toolgraph.internal", "127.0.0.1"],
    )
    app = {"origin": "https://app.example", **JSON}
    assert post(server, CHAT, ORCHESTRATED.replace("orchestrate", "passthrough"),
                **app).status_code == 200  # fmt: skip
    named = httpx.get(
        f"{server.url}/v1/models", headers={"host": "toolgraph.internal:80"}, timeout=30
    )
    assert named.status_code == 200
    loopback = httpx.get(f"{server.url}/v1/models", headers={"host": "localhost"}, timeout=30)
    refused(loopback, 403, "host_not_allowed")  # the setting replaces the default


def test_with_a_master_key_only_an_explicit_allowed_hosts_applies(
    start_proxy: StartProxy,
) -> None:
    keyed = start_proxy(master_key=KEY_A, upstream_api_key=UPSTREAM_KEY)
    auth = {"authorization": f"Bearer {KEY_A}"}
    # a page cannot send the key: its Origin, Host and body type are the client's business
    passthrough = ORCHESTRATED.replace("orchestrate", "passthrough")
    sent = post(keyed, CHAT, passthrough, **auth, origin="https://app.example",
                host="proxy.example", **{"content-type": "text/plain"})  # fmt: skip
    assert sent.status_code == 200, sent.text
    fenced = start_proxy(master_key=KEY_A, allowed_hosts=["proxy.example"])
    refused(httpx.get(f"{fenced.url}/v1/models", headers=auth, timeout=30), 403,
            "host_not_allowed")  # fmt: skip


def test_the_start_up_log_warns_of_a_proxy_without_a_key(
    start_proxy: StartProxy, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="proxy.services"):
        start_proxy(master_key=KEY_A)
        assert not [r for r in caplog.records if "WITHOUT a master key" in r.getMessage()]
        start_proxy()
    (warning,) = [r for r in caplog.records if "WITHOUT a master key" in r.getMessage()]
    assert warning.levelno == logging.WARNING
    assert "Answering Host 127.0.0.1, ::1, localhost;" in warning.getMessage()
