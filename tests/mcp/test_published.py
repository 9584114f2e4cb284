"""Published MCP servers, as users run them: npm's ``@modelcontextprotocol/server-filesystem``
over a folder the test made, PyPI's ``mcp-server-time`` and ``mcp-server-git`` over a
repository the test made (``make mcp-servers`` installs them, pinned; missing, they fail
under CI). Each is synced into the catalog, then one of its tools is run through the
executor as one node of an orchestrate plan, and through ``toolgraph tools call``."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
from collections.abc import AsyncIterator, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from pydantic import JsonValue

from graph_store.embedded import InProcessStore
from graph_store.models import Tool
from graph_store.store import GraphStore, open_store
from proxy.cli import main
from proxy.config import ExecutorSettings, McpServerSettings
from proxy.execute.plan import PlanNode, ToolPlan
from proxy.execute.scheduler import CallRecord
from proxy.execute.service import ToolExecutor
from proxy.mcp.sources import McpSources
from tests.mcp.conftest import node_server, pypi_server

READ_ONLY = {"readOnlyHint": True, "openWorldHint": False}
#: The hints the PyPI servers give their read-only tools, all four spelt out.
READ_ONLY_ALL = {**READ_ONLY, "destructiveHint": False, "idempotentHint": True}


@contextlib.asynccontextmanager
async def synced(server: McpServerSettings, store: GraphStore) -> AsyncIterator[McpSources]:
    """``server`` started and its listing written into ``store``."""
    mcp = McpSources([server], 30.0, store)
    mcp.start()
    try:
        async with asyncio.timeout(120):
            await mcp.settled()
        assert mcp.connected() == [server.name]
        yield mcp
    finally:
        await mcp.aclose()


async def run_node(
    mcp: McpSources,
    tool: Tool,
    arguments: Mapping[str, JsonValue],
    *,
    destructive: bool = True,
) -> CallRecord:
    """``tool`` run as the one node of a plan, by orchestrate mode's executor."""
    executor = ToolExecutor(ExecutorSettings(), mcp=mcp)
    plan = ToolPlan(nodes=(PlanNode(id="s1", tool=tool.name, arguments=dict(arguments)),))
    try:
        executed = await executor.execute(plan, {tool.name: tool}, None, destructive=destructive)
    finally:
        await executor.aclose()
    return executed.run.records["s1"]


def tool(store: InProcessStore, name: str) -> Tool:
    found = store.get_tool(name)
    assert found is not None, (name, sorted(store.names()))
    return found


def files_server(folder: Path) -> McpServerSettings:
    return node_server("files", "server-filesystem", str(folder))


def time_server() -> McpServerSettings:
    return pypi_server("time", "mcp_server_time", "--local-timezone", "Europe/Oslo")


def git_server(repository: Path) -> McpServerSettings:
    return pypi_server("git", "mcp_server_git", "--repository", str(repository))


def make_repository(folder: Path, message: str) -> Path:
    """A git repository with one commit, ``message``."""
    folder.mkdir()
    (folder / "README").write_text("a repository the test made\n", encoding="utf-8")
    git = ["git", "-C", str(folder), "-c", "user.name=Test", "-c", "user.email=test@example.com"]
    for args in (["init", "-q"], ["add", "README"], ["commit", "-q", "-m", message]):
        subprocess.run([*git, *args], check=True, capture_output=True)
    return folder


async def test_filesystem_reads_what_the_test_wrote_and_writes_under_a_guarantee(
    tmp_path: Path, store: InProcessStore
) -> None:
    folder = tmp_path / "files"
    folder.mkdir()
    (folder / "notes.txt").write_text("written by the test\n", encoding="utf-8")
    async with synced(files_server(folder), store) as mcp:
        assert {"files_read_text_file", "files_write_file", "files_list_directory"} <= set(
            store.names()
        )
        read = tool(store, "files_read_text_file")
        assert (read.original_name, read.provenance.format, read.provenance.file) == (
            "read_text_file",
            "mcp",
            "files",
        )
        assert read.provenance.hints == READ_ONLY
        assert read.endpoint is not None
        assert read.endpoint.url == "mcp://files/read_text_file"
        write = tool(store, "files_write_file")
        assert write.provenance.hints["destructiveHint"] is True
        record = await run_node(mcp, read, {"path": str(folder / "notes.txt")})
        assert record.outcome == "ok", record.error
        assert record.output == {"content": "written by the test\n"}
        written = {"path": str(folder / "new.txt"), "content": "written by the server"}
        refused = await run_node(mcp, write, written, destructive=False)
        assert refused.outcome != "ok"
        assert "Idempotency-Key" in refused.error
        assert not (folder / "new.txt").exists()
        record = await run_node(mcp, write, written)
        assert record.outcome == "ok", record.error
    assert (folder / "new.txt").read_text(encoding="utf-8") == "written by the server"


async def test_time_answers_a_time_that_parses(store: InProcessStore) -> None:
    async with synced(time_server(), store) as mcp:
        assert {"time_get_current_time", "time_convert_time"} <= set(store.names())
        now = tool(store, "time_get_current_time")
        assert now.provenance.hints == READ_ONLY_ALL
        assert now.response_schema is not None
        record = await run_node(mcp, now, {"timezone": "Asia/Tokyo"})
        assert record.outcome == "ok", record.error
        assert isinstance(record.output, dict)
        answered = datetime.fromisoformat(str(record.output["datetime"]))
        assert answered.utcoffset() == timedelta(hours=9)
        assert abs(answered - datetime.now(UTC)) < timedelta(hours=1)
        converted = await run_node(
            mcp,
            tool(store, "time_convert_time"),
            {"source_timezone": "Europe/Oslo", "time": "12:00", "target_timezone": "Asia/Tokyo"},
        )
        assert converted.outcome == "ok", converted.error
        assert isinstance(converted.output, dict)
        target = converted.output["target"]
        assert isinstance(target, dict)
        assert datetime.fromisoformat(str(target["datetime"])).hour == 20  # UTC+1 to UTC+9


async def test_git_logs_a_repository_the_test_made(tmp_path: Path, store: InProcessStore) -> None:
    repository = make_repository(tmp_path / "repo", "First commit, by the test")
    async with synced(git_server(repository), store) as mcp:
        log = tool(store, "git_git_log")  # the server's own names start with git_
        assert log.original_name == "git_log"
        assert log.provenance.hints == READ_ONLY_ALL
        assert tool(store, "git_git_reset").provenance.hints["destructiveHint"] is True
        record = await run_node(mcp, log, {"repo_path": str(repository)})
        assert record.outcome == "ok", record.error
        assert isinstance(record.output, str)
        assert record.output.startswith("Commit history:")
        assert "First commit, by the test" in record.output


def sync_catalog(data: Path, server: McpServerSettings) -> None:
    """The catalog under ``data`` holding ``server``'s tools (as a proxy would write it)."""

    async def sync(store: GraphStore) -> None:
        async with synced(server, store):
            pass

    store = open_store(data)
    try:
        asyncio.run(sync(store))
    finally:
        store.close()


def call_from_a_shell(
    tmp_path: Path, server: McpServerSettings, name: str, arguments: Mapping[str, JsonValue]
) -> None:
    """``toolgraph tools call NAME`` with ``server`` in the settings file, once the
    catalog holds its tools."""
    sync_catalog(tmp_path / "data", server)
    settings = {
        "data_dir": str(tmp_path / "data"),
        "mcp_servers": [server.model_dump(mode="json")],
    }
    config = tmp_path / "toolgraph.yaml"
    config.write_text(yaml.safe_dump(settings), encoding="utf-8")
    argv = ["tools", "call", name, "--config", str(config), "--arguments", json.dumps(arguments)]
    assert main(argv) == 0


def test_tools_call_reads_a_file(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "files"
    folder.mkdir()
    (folder / "notes.txt").write_text("read from a shell\n", encoding="utf-8")
    call_from_a_shell(
        tmp_path, files_server(folder), "files_read_text_file", {"path": str(folder / "notes.txt")}
    )
    assert json.loads(capfd.readouterr().out) == {"content": "read from a shell\n"}


def test_tools_call_asks_the_time(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    call_from_a_shell(tmp_path, time_server(), "time_get_current_time", {"timezone": "UTC"})
    answered = json.loads(capfd.readouterr().out)
    assert datetime.fromisoformat(answered["datetime"]).utcoffset() == timedelta(0)
    assert answered["timezone"] == "UTC"


def test_tools_call_logs_a_repository(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    repository = make_repository(tmp_path / "repo", "Logged from a shell")
    call_from_a_shell(
        tmp_path, git_server(repository), "git_git_log", {"repo_path": str(repository)}
    )
    assert "Logged from a shell" in json.loads(capfd.readouterr().out)


def test_tools_call_of_a_server_that_is_not_configured_is_one_line(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    sync_catalog(tmp_path / "data", time_server())
    capfd.readouterr()  # the server's own lines
    config = tmp_path / "toolgraph.yaml"
    config.write_text(yaml.safe_dump({"data_dir": str(tmp_path / "data")}), encoding="utf-8")
    status = main(["tools", "call", "time_get_current_time", "--config", str(config)])
    err = capfd.readouterr().err.strip().splitlines()
    assert status == 1
    assert err == [
        "toolgraph: time_get_current_time is from MCP server time, which is not configured"
    ]
