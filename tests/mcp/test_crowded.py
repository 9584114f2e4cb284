"""A huge ``tools/list``: 3,003 tools over 13 pages (tests/mcp/crowded.py), all synced
under names that are unique and valid, one whose schema is not valid JSON Schema
among them (kept: its arguments are checked for what can be checked, and it runs); a
``list_changed`` notification writes only the tools that changed."""

from __future__ import annotations

import asyncio
import logging
import sys

import pytest

from graph_store.embedded import InProcessStore
from graph_store.names import is_valid_name
from proxy.config import McpServerSettings
from proxy.execute.arguments import validate_arguments
from proxy.mcp.sources import McpSources
from tests.mcp.conftest import ROOT, Changes
from tests.mcp.crowded import LONG

COUNT = 3000


def crowded() -> McpServerSettings:
    return McpServerSettings(
        name="crowded",
        command=[sys.executable, "-m", "tests.mcp.crowded", "--tools", str(COUNT)],
        env={"PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        connect_timeout=120,
    )


def synced_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "synced:" in r.getMessage()]


async def test_thousands_of_tools_over_pages_then_only_what_changed(
    store: InProcessStore, changes: Changes, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="proxy.mcp.sources")
    mcp = McpSources([crowded()], 30.0, store, changes)
    mcp.start()
    try:
        async with asyncio.timeout(300):
            await mcp.settled()
        assert mcp.connected() == ["crowded"]
        tools = {tool.original_name: tool for tool in store.list_tools()}
        assert len(tools) == COUNT + 3  # every page: pages, change and broken too
        names = [tool.name for tool in tools.values()]
        assert len(set(names)) == len(names)
        assert all(is_valid_name(name) for name in names)
        assert tools["lookup_0007"].name == "crowded_lookup_0007"
        assert tools["lookup.0007"].name.startswith("crowded_lookup_0007_")
        assert tools[f"{LONG}0007"].name != tools[f"{LONG}0008"].name  # past 64: a hash each
        pages = await mcp.invoke(tools["pages"], {})
        assert pages == str(-(-(COUNT + 3) // 250))  # one request a page, 13
        assert synced_lines(caplog) == [
            f"MCP server crowded synced: {COUNT + 3} tools written, 0 deleted, 0 edges, 0 errors"
        ]
        broken = tools["broken"]
        assert validate_arguments(broken, {}) == ["'n' is a required property"]
        assert await mcp.invoke(broken, {"n": 1}) == "broken"
        before = {tool.id: tool for tool in store.list_tools()}

        assert await mcp.invoke(tools["change"], {}) == "changed"
        await changes.until(lambda: store.get_tool("crowded_late_tool") is not None)
        assert synced_lines(caplog)[1:] == [
            "MCP server crowded synced: 2 tools written, 1 deleted, 0 edges, 0 errors"
        ]
        after = {tool.id: tool for tool in store.list_tools()}
        assert set(before) - set(after) == {tools[f"{LONG}0001"].id}
        rewritten = after[tools["lookup_0000"].id]
        assert rewritten.description == "Look up entry 0 of the register, rewritten."
        unchanged = [id_ for id_ in after if id_ in before and after[id_] == before[id_]]
        assert len(unchanged) == COUNT + 3 - 2  # all but the dropped and the rewritten
    finally:
        await mcp.aclose()
