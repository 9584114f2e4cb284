"""A restart is served from the index snapshot the last full load left, before the
catalog's sync (packs, Qdrant, plan memory) ends in the background; readiness flips
on the served event and shows the sync's state."""

from __future__ import annotations

import asyncio
from pathlib import Path

from graph_store.store import open_store
from proxy.config import load_settings
from proxy.orchestrate.catalog import CatalogService
from proxy.select.service import SelectService
from proxy.tools.catalog import builtin_tools

#: Generous: a loaded machine (no timing is asserted, only the order of events).
WAIT = 300


async def test_a_restart_serves_the_snapshot_first_and_the_sync_after(tmp_path: Path) -> None:
    settings = load_settings(data_dir=tmp_path, planner={"memory_k": 0})
    select = SelectService(settings.retriever)
    first = CatalogService(settings, select)
    await first.get()  # a full load: it leaves the snapshot
    first.close()
    added = builtin_tools()[0].model_copy(
        update={"id": "added-tool", "name": "added_tool", "original_name": "added_tool"}
    )
    store = open_store(tmp_path, None)
    store.upsert_tools([added])  # written while the process was down: not in the snapshot
    store.close()

    restart = CatalogService(settings, select)
    restart.preload()
    try:
        assert restart.loading
        assert restart.sync == "running"
        await asyncio.wait_for(restart.served.wait(), WAIT)
        assert not restart.loading  # readiness flips here, with the sync still running
        assert restart.sync == "running"
        served = await restart.get()
        assert {tool.name for tool in builtin_tools()} <= set(served.tools)
        assert "added_tool" not in served.tools  # it waits for the sync
        assert served.memory is None

        await asyncio.wait_for(restart.synced.wait(), WAIT)
        assert restart.sync == "done"
        synced = await restart.get()
        assert "added_tool" in synced.tools
        assert synced.memory is not None
    finally:
        await restart.settle()
        restart.close()
        select.close()


async def test_a_first_start_without_a_snapshot_is_loading_until_the_full_load(
    tmp_path: Path,
) -> None:
    settings = load_settings(data_dir=tmp_path, planner={"memory_k": 0})
    select = SelectService(settings.retriever)
    catalog = CatalogService(settings, select)
    catalog.preload()
    try:
        await asyncio.wait_for(catalog.served.wait(), WAIT)
        assert catalog.sync == "done"  # nothing to serve before the full load ended
        assert not catalog.loading
        assert (await catalog.get()).memory is not None
    finally:
        await catalog.settle()
        catalog.close()
        select.close()


async def test_a_sync_that_changed_nothing_keeps_the_served_index(tmp_path: Path) -> None:
    """No vectors read back out of Qdrant, no BM25 or int8 copy built twice."""
    settings = load_settings(data_dir=tmp_path, planner={"memory_k": 0})
    select = SelectService(settings.retriever)
    first = CatalogService(settings, select)
    await first.get()
    first.close()
    restart = CatalogService(settings, select)
    restart.preload()
    try:
        await asyncio.wait_for(restart.served.wait(), WAIT)
        served = await restart.get()
        await asyncio.wait_for(restart.synced.wait(), WAIT)
        synced = await restart.get()
        assert synced is not served
        assert synced.memory is not None
        assert synced.planner.finder.index is served.planner.finder.index
    finally:
        await restart.settle()
        restart.close()
        select.close()
