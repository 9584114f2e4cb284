"""Seeding the packs' tools into the embedded store, as every catalog load does first: a
pack that leaves the settings takes its tools with it, and nothing else."""

from __future__ import annotations

from pathlib import Path

from graph_store.embedded import InProcessStore
from graph_store.models import Endpoint
from proxy.catalog.packs import seed_packs
from proxy.config import Settings, load_settings
from proxy.mcp.catalog import sync_server
from proxy.tools.packs.math.catalog import builtin_tools
from tests.graph_store.tools import make_tool

CHINOOK = {"database": [{"name": "chinook", "url": "demo"}]}


def settings(tmp_path: Path, **overrides: object) -> Settings:
    return load_settings(data_dir=tmp_path, **overrides)


def names(store: InProcessStore) -> set[str]:
    return {tool.name for tool in store.list_tools()}


def test_a_pack_no_longer_configured_leaves_the_catalog_and_nothing_else_does(
    tmp_path: Path,
) -> None:
    store = InProcessStore.open(tmp_path / "graph")
    registered = make_tool("hotel_search", endpoint=Endpoint(url="https://api.example.com/hotels"))
    store.upsert_tools([registered])
    sync_server(store, "docs", [{"name": "search", "inputSchema": {"type": "object"}}])
    math = {tool.name for tool in builtin_tools()}
    seed_packs(store, settings(tmp_path, packs=CHINOOK))
    assert "chinook_run_select" in names(store)

    # The restart: the same store, settings without the database.
    seed_packs(store, settings(tmp_path))
    assert not {name for name in names(store) if name.startswith("chinook_")}
    assert names(store) == math | {"hotel_search", "docs_search"}

    seed_packs(store, settings(tmp_path, orchestrate={"builtin_tools": False}))
    assert names(store) == {"hotel_search", "docs_search"}
    store.close()
