"""``toolgraph mcp add|list|sync|remove`` against a running proxy's registry API; a
server added with one command has its tools planned and run in orchestrate mode."""

from __future__ import annotations

import sys

import pytest

from proxy.cli import main
from testing.brain import Brain
from tests.conftest import StartProxy
from tests.mcp.conftest import ROOT
from tests.mcp.server import TOOLS
from tests.orchestrate.conftest import ORCHESTRATE, sdk, trace, user

ADMIN = "tg-admin-key-0123456789"


def run(capfd: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(["mcp", *argv])
    captured = capfd.readouterr()
    return status, captured.out, captured.err


def test_add_list_sync_remove(
    start_proxy: StartProxy,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    brain: Brain,
) -> None:
    proxy = start_proxy(
        admin_key=ADMIN,
        mcp_registry_commands=True,
        planner={"policy": "llm", "top_k": 20, "memory_k": 0},
        orchestrate={"gate": False},
    )
    monkeypatch.setenv("TOOLGRAPH_ADMIN_KEY", ADMIN)
    where = ("--proxy", proxy.url)
    command = ("--command", f"{sys.executable} -m tests.mcp.server")
    status, out, err = run(
        capfd, "add", "test", *where, "--env", f"PYTHONPATH={ROOT}", "--cwd", str(ROOT), *command
    )
    assert (status, err) == (0, "")
    assert out.startswith(f"test  stdio  connected  {len(TOOLS)} tools  (registry)")
    status, out, _ = run(capfd, "list", *where)
    assert out.splitlines()[0].startswith(f"test  stdio  connected  {len(TOOLS)} tools")
    # One command, and its tools are found, planned and run in orchestrate mode.
    brain.one_step(
        "Find the coordinates of Oslo", "coordinates", "test_lookup_city", {"city": "Oslo"}
    )
    raw = sdk(proxy).chat.completions.with_raw_response.create(
        model="fake-model", messages=user("Where is Oslo?"), extra_body=ORCHESTRATE
    )
    (call,) = trace(proxy, raw.headers["x-toolgraph-trace-id"])["calls"]
    assert (call["tool"], call["outcome"], call["mcp_server"]) == ("test_lookup_city", "ok", "test")
    status, out, _ = run(capfd, "sync", "test", *where)
    assert out.strip() == "test: 0 tools written, 0 deleted, 0 edges, 0 refused"
    status, out, _ = run(capfd, "remove", "test", *where)
    assert (status, out.strip()) == (0, f"test: removed, {len(TOOLS)} tools deleted")
    status, out, _ = run(capfd, "list", *where)
    assert out.strip() == "no MCP servers"


def test_a_refusal_is_one_line_and_exit_1(
    start_proxy: StartProxy, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy = start_proxy(admin_key=ADMIN)
    monkeypatch.setenv("TOOLGRAPH_ADMIN_KEY", ADMIN)
    status, out, err = run(capfd, "remove", "nothing", "--proxy", proxy.url)
    assert (status, out) == (1, "")
    assert err == "toolgraph mcp: no MCP server named 'nothing'\n"


def test_bad_arguments_exit_2(
    capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLGRAPH_ADMIN_KEY", ADMIN)
    status, _, err = run(capfd, "add", "x", "--url", "http://a/mcp", "--header", "nokey")
    assert (status, err) == (2, "toolgraph mcp: --header 'nokey' is not KEY=VALUE\n")
    status, _, err = run(capfd, "add", "x")
    assert status == 2
    assert "either --command or --url" in err


def test_no_admin_key_and_no_proxy_are_one_line(capfd: pytest.CaptureFixture[str]) -> None:
    status, _, err = run(capfd, "list")
    assert (status, err) == (1, "toolgraph mcp: set TOOLGRAPH_ADMIN_KEY (the proxy's admin key)\n")
