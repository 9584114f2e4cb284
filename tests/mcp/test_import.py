"""``toolgraph catalog import`` of an MCP server spec (an MCP client's ``mcpServers``
JSON, or toolgraph's ``mcp_servers`` YAML): the servers' tools written into the
catalog and the servers kept, so that the proxy runs them when it starts; a server
that cannot be reached, or a spec that is not valid, is one line and exit status 1; a
running proxy that shares a Redis starts an imported server at once and runs its
tools in orchestrate mode."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import httpx
import pytest
import yaml

from graph_store.embedded import InProcessStore
from proxy.cli import main
from proxy.mcp.registered import FILE_NAME
from testing.brain import Brain
from tests.conftest import StartProxy, running_redis
from tests.mcp.conftest import ROOT, python_server, wait_connected
from tests.mcp.server import TOOLS
from tests.mcp.test_workers import servers, until
from tests.orchestrate.conftest import ORCHESTRATE, sdk, trace, user

ADMIN = "tg-admin-key-0123456789"


def run(capfd: pytest.CaptureFixture[str], *paths: Path) -> tuple[int, str, str]:
    status = main(["catalog", "import", *map(str, paths)])
    captured = capfd.readouterr()
    return status, captured.out, captured.err


def client_spec(folder: Path) -> Path:
    """The tests' server as an MCP client (Claude Desktop, Cursor) lists it."""
    entry = {
        "command": sys.executable,
        "args": ["-m", "tests.mcp.server"],
        "env": {"PYTHONPATH": str(ROOT)},
        "cwd": str(ROOT),
    }
    path = folder / "claude_desktop_config.json"
    path.write_text(json.dumps({"mcpServers": {"test": entry}}))
    return path


def test_a_clients_spec_imports_the_tools_and_the_proxy_runs_the_server(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], start_proxy: StartProxy
) -> None:
    tools = tmp_path / "tools.json"  # a file of tools beside it is imported as before
    tools.write_text(json.dumps([{"type": "function", "function": {"name": "add_numbers"}}]))
    status, out, err = run(capfd, client_spec(tmp_path), tools)
    assert (status, err) == (0, "")
    assert out.splitlines()[0] == (
        f"test: {len(TOOLS)} tools written, 0 deleted, 1 edges, 0 refused (kept: the proxy runs it once mcp_registry_commands is on)"
    )
    proxy = start_proxy(admin_key=ADMIN, mcp_registry_commands=True)
    data_dir = proxy.settings.data_dir
    assert (data_dir / FILE_NAME).exists()
    wait_connected(proxy)
    headers = {"authorization": f"Bearer {ADMIN}"}
    listed = httpx.get(f"{proxy.url}/v1/toolgraph/mcp/servers", headers=headers, timeout=30)
    ((name, connected, source),) = [
        (s["name"], s["connected"], s["source"]) for s in listed.json()["data"]
    ]
    assert (name, connected, source) == ("test", True, "registry")
    proxy.__exit__()
    store = InProcessStore.open(data_dir / "graph")
    try:
        city = store.get_tool("test_lookup_city")
        assert city is not None
        assert (city.provenance.format, city.provenance.file) == ("mcp", "test")
        assert store.get_tool("add_numbers") is not None
    finally:
        store.close()


def test_a_server_that_cannot_start_is_one_line_and_the_others_are_imported(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    servers = [
        python_server().model_dump(mode="json"),
        {"name": "nowhere", "command": ["/nonexistent/mcp-server"]},
    ]
    spec = tmp_path / "servers.yaml"
    spec.write_text(yaml.safe_dump({"mcp_servers": servers}))
    status, out, err = run(capfd, spec)
    assert status == 1
    assert out.startswith(f"test: {len(TOOLS)} tools written")
    assert err.strip() == (
        "toolgraph: MCP server nowhere: cannot start '/nonexistent/mcp-server' (no such file)"
    )


@pytest.mark.parametrize(
    ("servers", "problem"),
    [
        ({"old": {"type": "sse", "url": "http://127.0.0.1:1/sse"}}, "SSE transport"),
        ({"bad name!": {"command": "x"}}, "MCP server 'bad name!': name: String should match"),
        ({"both": {"command": "", "args": []}}, "give a command or a url"),
    ],
)
def test_a_spec_that_is_not_valid_is_one_line(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], servers: object, problem: str
) -> None:
    spec = tmp_path / "mcp.json"
    spec.write_text(json.dumps({"mcpServers": servers}))
    status, out, err = run(capfd, spec)
    assert (status, out) == (1, "")
    assert err.startswith("toolgraph: ")
    assert problem in err
    assert len(err.strip().splitlines()) == 1


def test_a_running_proxy_that_shares_a_redis_starts_an_imported_server(
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    start_proxy: StartProxy,
    brain: Brain,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with running_redis() as redis:  # the test's own: the kept list would reach others
        proxy = start_proxy(
            admin_key=ADMIN,
            mcp_registry_commands=True,
            redis_url=redis.url,
            planner={"policy": "llm", "top_k": 20, "memory_k": 0},
            orchestrate={"gate": False},
        )
        monkeypatch.setenv("TOOLGRAPH_REDIS_URL", redis.url)
        status, _, err = run(capfd, client_spec(tmp_path))
        assert (status, err) == (0, "")
        until("started it", lambda: servers(proxy).get("test", {}).get("connected") is True)
        brain.one_step(
            "Find the coordinates of Oslo", "coordinates", "test_lookup_city", {"city": "Oslo"}
        )
        raw = sdk(proxy).chat.completions.with_raw_response.create(
            model="fake-model", messages=user("Where is Oslo?"), extra_body=ORCHESTRATE
        )
        (call,) = trace(proxy, raw.headers["x-toolgraph-trace-id"])["calls"]
        assert (call["tool"], call["outcome"], call["mcp_server"]) == (
            "test_lookup_city",
            "ok",
            "test",
        )
        proxy.__exit__()  # before its Redis goes
