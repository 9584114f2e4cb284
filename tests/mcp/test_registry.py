"""MCP servers through the registry API (admin key): added, listed, synced, removed,
kept across a restart; stdio servers only when the settings allow commands; an HTTP
server's host under the tools' egress policy."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import httpx
import pytest

from proxy.mcp.registered import FILE_NAME
from tests.conftest import ServerThread, StartProxy, free_port
from tests.mcp.conftest import python_server, wait_connected
from tests.mcp.server import TOOLS

ADMIN = "tg-admin-key-0123456789"
SERVERS = "/v1/toolgraph/mcp/servers"
TOOL_NAMES = {"test_lookup_city", "test_forecast", "test_reject"}


def admin(server: ServerThread, method: str, path: str, **kwargs: Any) -> httpx.Response:
    headers = {"authorization": f"Bearer {ADMIN}"}
    return httpx.request(method, server.url + path, headers=headers, timeout=120, **kwargs)


def catalog_names(server: ServerThread) -> set[str]:
    listed = admin(server, "GET", "/v1/toolgraph/tools").json()["data"]
    return {tool["name"] for tool in listed}


def spec(name: str = "test") -> dict[str, Any]:
    return python_server(name).model_dump(mode="json")


def test_a_server_is_added_listed_synced_and_removed(
    start_proxy: StartProxy, tmp_path: Path
) -> None:
    proxy = start_proxy(admin_key=ADMIN, mcp_registry_commands=True)
    added = admin(proxy, "POST", SERVERS, json=spec())
    assert added.status_code == 201, added.text
    assert added.json()["connected"] is True
    assert added.json()["source"] == "registry"
    assert added.json()["tools"] == len(TOOLS)
    assert catalog_names(proxy) >= TOOL_NAMES
    (listed,) = admin(proxy, "GET", SERVERS).json()["data"]
    assert listed["name"] == "test"
    assert "env" not in listed  # env and header values may be keys
    synced = admin(proxy, "POST", f"{SERVERS}/test/sync")
    assert synced.status_code == 200, synced.text
    assert synced.json()["written"] == 0  # nothing changed since the listing on connect
    removed = admin(proxy, "DELETE", f"{SERVERS}/test")
    assert removed.json()["tools_deleted"] == len(TOOLS)
    assert not TOOL_NAMES & catalog_names(proxy)
    assert admin(proxy, "GET", SERVERS).json()["data"] == []
    assert admin(proxy, "DELETE", f"{SERVERS}/test").status_code == 404


def test_an_added_server_is_started_again_after_a_restart(start_proxy: StartProxy) -> None:
    first = start_proxy(admin_key=ADMIN, mcp_registry_commands=True)
    assert admin(first, "POST", SERVERS, json=spec("kept")).status_code == 201
    assert (first.settings.data_dir / FILE_NAME).exists()
    first.__exit__()
    second = start_proxy(admin_key=ADMIN, mcp_registry_commands=True)
    wait_connected(second)
    (listed,) = admin(second, "GET", SERVERS).json()["data"]
    assert (listed["name"], listed["source"]) == ("kept", "registry")
    assert admin(second, "POST", f"{SERVERS}/kept/sync").status_code == 200


def test_a_kept_stdio_server_is_not_started_without_the_commands_setting(
    start_proxy: StartProxy, caplog: pytest.LogCaptureFixture
) -> None:
    # the permission is checked where the kept list is read, not only where the API adds
    first = start_proxy(admin_key=ADMIN, mcp_registry_commands=True)
    assert admin(first, "POST", SERVERS, json=spec("kept")).status_code == 201
    first.__exit__()
    caplog.set_level(logging.WARNING, logger="proxy.mcp.permits")
    second = start_proxy(admin_key=ADMIN)
    assert admin(second, "GET", SERVERS).json()["data"] == []  # not running here
    assert (
        "MCP server kept from the kept list is not started: stdio MCP servers run a command"
        in caplog.text
    )


@pytest.mark.parametrize("dry_run", ["false", "true"])
def test_a_header_reads_only_the_environment_the_operator_lists(
    start_proxy: StartProxy, dry_run: str
) -> None:
    proxy = start_proxy(
        admin_key=ADMIN, mcp_header_env=["CRM_TOKEN"], executor={"allow_private_networks": True}
    )
    url = f"http://127.0.0.1:{free_port()}/mcp"
    leak = {"name": "leak", "url": url, "headers": {"X-Key": "env:TOOLGRAPH_ADMIN_KEY"}}
    params = {"dry_run": dry_run}
    refused = admin(proxy, "POST", SERVERS, params=params, json=leak)
    assert refused.status_code == 403
    error = refused.json()["error"]
    assert (error["code"], error["param"]) == ("mcp_header_env_denied", "headers")
    assert "TOOLGRAPH_ADMIN_KEY, which mcp_header_env does not list" in error["message"]
    listed = {"name": "crm", "url": url, "headers": {"X-Key": "env:CRM_TOKEN"}}
    answer = admin(proxy, "POST", SERVERS, params=params, json=listed)  # nobody listens there
    assert answer.status_code != 403, answer.text


def test_a_stdio_server_needs_the_commands_setting(start_proxy: StartProxy) -> None:
    proxy = start_proxy(admin_key=ADMIN)
    refused = admin(proxy, "POST", SERVERS, json=spec())
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "mcp_commands_disabled"
    assert admin(proxy, "GET", SERVERS).json()["data"] == []


def test_a_settings_server_is_listed_but_not_removed_or_replaced(start_proxy: StartProxy) -> None:
    proxy = start_proxy(admin_key=ADMIN, mcp_registry_commands=True, mcp_servers=[spec()])
    (listed,) = admin(proxy, "GET", SERVERS).json()["data"]
    assert listed["source"] == "settings"
    assert admin(proxy, "DELETE", f"{SERVERS}/test").json()["error"]["code"] == "mcp_server_fixed"
    assert admin(proxy, "POST", SERVERS, json=spec()).status_code == 409


def test_an_http_server_outside_the_allow_list_is_refused(start_proxy: StartProxy) -> None:
    proxy = start_proxy(admin_key=ADMIN, executor={"allowed_hosts": ["tools.example.com"]})
    refused = admin(proxy, "POST", SERVERS, json={"name": "far", "url": "http://10.1.2.3/mcp"})
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "egress_denied"
    assert "allow-list" in refused.json()["error"]["message"]


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("http://[::1", "not a URL (Invalid IPv6 URL)"),
        ("http:///x", "must name a host"),
        ("http://h:99999/mcp", "not a URL (Port out of range 0-65535)"),
    ],
)
def test_a_url_that_does_not_parse_or_names_no_host_is_400(
    start_proxy: StartProxy, url: str, problem: str
) -> None:
    proxy = start_proxy(admin_key=ADMIN)
    refused = admin(proxy, "POST", SERVERS, json={"name": "bad", "url": url})
    assert refused.status_code == 400, refused.text
    assert problem in refused.json()["error"]["message"]


def test_bad_input_and_no_key_are_refused(start_proxy: StartProxy) -> None:
    proxy = start_proxy(admin_key=ADMIN, mcp_registry_commands=True)
    both = admin(
        proxy, "POST", SERVERS, json={"name": "x", "url": "http://a/mcp", "command": ["y"]}
    )
    assert both.status_code == 400
    assert "exactly one of command" in both.json()["error"]["message"]
    bad_name = admin(proxy, "POST", SERVERS, json={"name": "a b", "url": "http://a/mcp"})
    assert bad_name.json()["error"]["param"] == "name"
    anonymous = httpx.get(proxy.url + SERVERS, timeout=30)
    assert anonymous.status_code == 401
