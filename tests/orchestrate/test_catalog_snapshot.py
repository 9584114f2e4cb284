"""A restart is served from the index snapshot the last full load left, before the
catalog's sync (packs, Qdrant, plan memory) ends in the background; readiness flips
on the served event and shows the sync's state."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np

from graph_store.models import Tool
from graph_store.store import open_store
from proxy.catalog.loaded import Catalog, StoredTools
from proxy.catalog.service import CatalogService
from proxy.config import Settings, load_settings
from proxy.encoder.service import EncoderService
from proxy.tools.packs.math.catalog import builtin_tools

#: Generous: a loaded machine (no timing is asserted, only the order of events).
WAIT = 300


async def test_a_restart_serves_the_snapshot_first_and_the_sync_after(tmp_path: Path) -> None:
    settings = load_settings(data_dir=tmp_path, planner={"memory_k": 0})
    encoders = EncoderService(settings.retriever)
    first = CatalogService(settings, encoders)
    await first.get()  # a full load: it leaves the snapshot
    first.close()
    added = imported_tool()
    store = open_store(tmp_path, None)
    store.upsert_tools([added])  # written while the process was down: not in the snapshot
    store.close()

    restart = CatalogService(settings, encoders)
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
        assert not isinstance(served.tools, StoredTools)  # the store was read tool by tool
        assert served.memory is None

        await asyncio.wait_for(restart.synced.wait(), WAIT)
        assert restart.sync == "done"
        synced = await restart.get()
        assert "added_tool" in synced.tools
        assert synced.memory is not None
    finally:
        await restart.settle()
        restart.close()
        encoders.close()


async def test_a_first_start_without_a_snapshot_is_loading_until_the_full_load(
    tmp_path: Path,
) -> None:
    settings = load_settings(data_dir=tmp_path, planner={"memory_k": 0})
    encoders = EncoderService(settings.retriever)
    catalog = CatalogService(settings, encoders)
    catalog.preload()
    try:
        await asyncio.wait_for(catalog.served.wait(), WAIT)
        assert catalog.sync == "done"  # nothing to serve before the full load ended
        assert not catalog.loading
        assert (await catalog.get()).memory is not None
    finally:
        await catalog.settle()
        catalog.close()
        encoders.close()


async def test_a_sync_that_changed_nothing_keeps_the_served_index(tmp_path: Path) -> None:
    """No vectors read back out of Qdrant, no BM25 or int8 copy built twice."""
    settings = load_settings(data_dir=tmp_path, planner={"memory_k": 0})
    encoders = EncoderService(settings.retriever)
    first = CatalogService(settings, encoders)
    await first.get()
    first.close()
    restart = CatalogService(settings, encoders)
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
        encoders.close()


async def test_question_rows_are_loaded_snapshotted_and_served_after_a_restart(
    tmp_path: Path,
) -> None:
    """With ``retriever.expand_documents`` the full load embeds each tool's questions, the
    snapshot carries them, a restart serves them, and its sync (nothing changed) keeps
    that index; a restart with the setting off serves no question rows."""
    settings = load_settings(
        data_dir=tmp_path, planner={"memory_k": 0}, retriever={"expand_documents": True}
    )
    encoders = EncoderService(settings.retriever)
    try:
        first = CatalogService(settings, encoders)
        loaded = await first.get()
        first.close()
        extra = loaded.planner.finder.index.extra
        assert extra is not None
        assert len(extra.owners) >= 3 * len(loaded.planner.finder.index)

        restart = CatalogService(settings, encoders)
        restart.preload()
        try:
            await asyncio.wait_for(restart.served.wait(), WAIT)
            served = await restart.get()
            held = served.planner.finder.index.extra
            assert held is not None
            np.testing.assert_array_equal(held.vectors, extra.vectors)
            await asyncio.wait_for(restart.synced.wait(), WAIT)
            synced = await restart.get()
            assert synced.planner.finder.index is served.planner.finder.index
        finally:
            await restart.settle()
            restart.close()

        off = settings.model_copy(
            update={"retriever": settings.retriever.model_copy(update={"expand_documents": False})}
        )
        assert (await _restart(off, encoders)).planner.finder.index.extra is None
    finally:
        encoders.close()


async def _restart(settings: Settings, encoders: EncoderService) -> Catalog:
    """The catalog a restart serves first, once its background sync has ended too."""
    restart = CatalogService(settings, encoders)
    restart.preload()
    try:
        await asyncio.wait_for(restart.served.wait(), WAIT)
        served = await restart.get()
        await asyncio.wait_for(restart.synced.wait(), WAIT)
    finally:
        await restart.settle()
        restart.close()
    return served


async def test_a_restart_on_an_unwritten_store_reads_no_tool_before_serving(
    tmp_path: Path,
) -> None:
    """The store's version is the snapshot's: every row is served as written, and a
    tool's record is read when the executor first asks for it. A write in between sends
    the next restart down the tool-by-tool path, and its sync writes a snapshot that
    the restart after it serves whole again."""
    settings = load_settings(data_dir=tmp_path, planner={"memory_k": 0}, orchestrate={"gate": True})
    encoders = EncoderService(settings.retriever)
    try:
        first = CatalogService(settings, encoders)
        loaded = await first.get()
        first.close()

        encoder = await encoders.encoder()  # the gate's encoder is its base: one counter
        before = encoder.counts.texts
        served = await _restart(settings, encoders)
        assert encoder.counts.texts == before  # the gate's vectors came with the snapshot
        assert isinstance(served.tools, StoredTools)
        assert set(served.tools) == set(loaded.tools)
        name = builtin_tools()[0].name
        assert name in served.tools
        assert served.tools[name] == loaded.tools[name]
        assert "no_such_tool" not in served.tools
        assert served.tools.get("no_such_tool") is None
        index = served.planner.finder.index
        assert index.bm25 is not None
        assert len(index.bm25) == len(index)
        assert served.gate is not None
        assert loaded.gate is not None
        assert served.gate.documents == loaded.gate.documents
        assert served.gate.view.words == loaded.gate.view.words
        assert served.gate.view.names == loaded.gate.view.names

        added = imported_tool()
        store = open_store(tmp_path, None)
        store.upsert_tools([added])
        store.close()
        after_write = await _restart(settings, encoders)
        assert not isinstance(after_write.tools, StoredTools)
        assert "added_tool" not in after_write.tools

        again = await _restart(settings, encoders)
        assert isinstance(again.tools, StoredTools)
        assert "added_tool" in again.tools
    finally:
        encoders.close()


def imported_tool() -> Tool:
    """A tool an import wrote (not a pack's: a load keeps it though no pack gives it)."""
    template = builtin_tools()[0]
    return template.model_copy(
        update={
            "id": "added-tool",
            "name": "added_tool",
            "original_name": "added_tool",
            "provenance": template.provenance.model_copy(update={"file": "imports/added.json"}),
        }
    )
