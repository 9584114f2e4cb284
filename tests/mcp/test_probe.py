"""A server checked before it is added (``POST /v1/toolgraph/mcp/servers?dry_run=true``,
the console's form): its tools listed under their catalog names, nothing kept, and
every way it can fail said in words."""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import httpx
import pytest

from proxy.config import McpServerSettings
from proxy.errors import EgressDenied, ToolError
from proxy.execute.egress import EgressPolicy
from proxy.mcp.probe import probe_server
from tests.conftest import ServerThread, StartProxy, free_port
from tests.mcp.conftest import python_server
from tests.mcp.server import TOOLS

ADMIN = "tg-admin-key-0123456789"
SERVERS = "/v1/toolgraph/mcp/servers"


def admin(server: ServerThread, method: str, path: str, **kwargs: Any) -> httpx.Response:
    headers = {"authorization": f"Bearer {ADMIN}"}
    return httpx.request(method, server.url + path, headers=headers, timeout=120, **kwargs)


def test_a_dry_run_lists_the_tools_and_keeps_nothing(start_proxy: StartProxy) -> None:
    proxy = start_proxy(admin_key=ADMIN, mcp_registry_commands=True)
    spec = python_server("probe").model_dump(mode="json")
    checked = admin(proxy, "POST", SERVERS, params={"dry_run": "true"}, json=spec)
    assert checked.status_code == 200, checked.text
    body = checked.json()
    assert body["object"] == "mcp_server.check"
    assert body["transport"] == "stdio"
    lookup = next(t for t in body["tools"] if t["mcp_name"] == "lookup_city")
    assert lookup["name"] == "probe_lookup_city"
    assert lookup["description"]
    assert len(body["tools"]) == len(TOOLS)
    assert admin(proxy, "GET", SERVERS).json()["data"] == []
    catalog = admin(proxy, "GET", "/v1/toolgraph/tools").json()["data"]
    assert not [t for t in catalog if t["name"].startswith("probe_")]
    # checking a server that is added already says so, as adding it would
    assert admin(proxy, "POST", SERVERS, json=spec).status_code == 201
    again = admin(proxy, "POST", SERVERS, params={"dry_run": "true"}, json=spec)
    assert again.status_code == 409


def test_a_dry_run_of_a_command_needs_the_setting(start_proxy: StartProxy) -> None:
    proxy = start_proxy(admin_key=ADMIN)
    spec = python_server("probe").model_dump(mode="json")
    refused = admin(proxy, "POST", SERVERS, params={"dry_run": "true"}, json=spec)
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "mcp_commands_disabled"


def _exits(message: str) -> McpServerSettings:
    script = f"import sys; print({message!r}, file=sys.stderr); sys.exit(3)"
    return McpServerSettings(name="broken", command=[sys.executable, "-c", script])


@pytest.mark.parametrize(
    ("server", "words"),
    [
        (
            McpServerSettings(name="missing", command=["/nonexistent/mcp-server"]),
            "cannot start '/nonexistent/mcp-server' (no such file)",
        ),
        (
            _exits("config.toml: no such file"),
            "closed the connection before it answered initialize; it wrote: "
            "config.toml: no such file",
        ),
        (
            McpServerSettings(name="closed", url=f"http://127.0.0.1:{free_port()}/mcp"),
            "cannot reach http://127.0.0.1:",
        ),
        (
            python_server("silent", "--silent", connect_timeout=1),
            "did not answer initialize and tools/list within 1 s",
        ),
    ],
)
async def test_a_failure_is_said_in_words(server: McpServerSettings, words: str) -> None:
    with pytest.raises(ToolError) as failed:
        await probe_server(server, EgressPolicy(allow_private=True))
    assert words in failed.value.message
    assert failed.value.code == "mcp_server_unreachable"


async def test_the_egress_policy_refuses_before_connecting() -> None:
    server = McpServerSettings(name="private", url=f"http://127.0.0.1:{free_port()}/mcp")
    with pytest.raises(EgressDenied):
        await probe_server(server, EgressPolicy())


class _Recorder(BaseHTTPRequestHandler):
    """Answers every request 404, after noting its headers (the other origin)."""

    seen: ClassVar[list[dict[str, str]]] = []

    def do_POST(self) -> None:
        self.seen.append(dict(self.headers))
        self.send_response(404)
        self.send_header("content-length", "0")
        self.end_headers()

    do_GET = do_POST

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _redirecting_to(target: str) -> type[BaseHTTPRequestHandler]:
    class Redirect(_Recorder):
        def do_POST(self) -> None:
            self.send_response(307)
            self.send_header("location", target)
            self.send_header("content-length", "0")
            self.end_headers()

        do_GET = do_POST

    return Redirect


@contextlib.contextmanager
def _serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


async def test_a_redirect_to_another_origin_carries_no_header_of_the_server() -> None:
    """A server's headers (its credentials) go to its own origin only: a 307 to another
    origin (here another port) is not followed, and is said as a failure."""
    _Recorder.seen = []
    with (
        _serving(_Recorder) as other,
        _serving(_redirecting_to(f"{other}/mcp")) as first,
    ):
        server = McpServerSettings(
            name="moved", url=f"{first}/mcp", headers={"x-api-key": "sk-mcp-secret-0123456789"}
        )
        with pytest.raises(ToolError) as failed:
            await probe_server(server, EgressPolicy(allow_private=True))
    assert f"Redirect to {other}/mcp not followed" in failed.value.message
    assert not [h for h in _Recorder.seen if "sk-mcp-secret-0123456789" in str(h)]
