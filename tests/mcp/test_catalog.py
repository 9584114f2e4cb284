"""A server's listing written into the store, without a server: what is kept, replaced,
deleted and refused."""

from __future__ import annotations

from pathlib import Path

from pydantic import JsonValue

from graph_store.embedded import InProcessStore
from graph_store.ingest.openai_spec import parse_openai
from proxy.mcp.catalog import sync_server


def listed(*names: str) -> list[JsonValue]:
    return [{"name": name, "inputSchema": {"type": "object"}} for name in names]


def test_a_tool_the_server_no_longer_lists_is_deleted(tmp_path: Path) -> None:
    store = InProcessStore.open(tmp_path / "graph")
    assert sync_server(store, "s", listed("a", "b")).written == 2
    again = sync_server(store, "s", listed("a", "b"))
    assert (again.written, again.deleted) == (0, 0)  # nothing changed, nothing written
    report = sync_server(store, "s", listed("a"))
    assert (report.written, report.deleted) == (0, 1)
    assert sorted(store.names()) == ["s_a"]


def test_another_servers_tools_are_left_alone(tmp_path: Path) -> None:
    store = InProcessStore.open(tmp_path / "graph")
    sync_server(store, "one", listed("a"))
    sync_server(store, "two", listed("a"))
    sync_server(store, "one", listed())
    assert sorted(store.names()) == ["two_a"]


def test_names_that_fold_into_one_stay_apart(tmp_path: Path) -> None:
    store = InProcessStore.open(tmp_path / "graph")
    report = sync_server(store, "s", listed("get.item", "get item", "x" * 100))
    assert report.errors == []
    names = sorted(store.names())
    assert len(names) == 3
    assert "s_get_item" in names
    assert all(len(name) <= 64 for name in names)


def test_a_folded_name_goes_to_the_tool_that_needed_no_folding_in_any_order(
    tmp_path: Path,
) -> None:
    store = InProcessStore.open(tmp_path / "graph")
    sync_server(store, "s", listed("get.item", "get_item"))
    names = {tool.original_name: tool.name for tool in store.list_tools()}
    assert names["get_item"] == "s_get_item"
    assert names["get.item"].startswith("s_get_item_")
    again = sync_server(store, "s", listed("get_item", "get.item"))  # listed the other way
    assert (again.written, again.deleted) == (0, 0)


def test_a_name_another_source_holds_and_a_bad_schema_are_refused(tmp_path: Path) -> None:
    store = InProcessStore.open(tmp_path / "graph")
    store.upsert_tools(parse_openai(Path("x.json"), [{"name": "s_taken"}]).tools)
    listing = [*listed("taken", "fine"), {"name": "bad", "inputSchema": {"type": "array"}}]
    report = sync_server(store, "s", listing)
    assert report.written == 1
    problems = sorted(error.problem for error in report.errors)
    assert len(problems) == 2
    assert "already taken" in problems[1] or "already taken" in problems[0]
    assert sorted(store.names()) == ["s_fine", "s_taken"]
    taken = store.get_tool("s_taken")
    assert taken is not None
    assert taken.provenance.format == "openai"
