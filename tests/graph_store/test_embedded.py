"""The in-process store on disk: reopening, crash-safe writes, a corrupt file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from graph_store.embedded import FILE_NAME, LOCK_NAME, InProcessStore
from graph_store.errors import InvalidItem, StoreUnavailable
from graph_store.models import EdgeKind
from graph_store.store import neighbors
from tests.graph_store.tools import edge, make_tool

a, b, c = make_tool("alpha"), make_tool("beta"), make_tool("gamma", category="other")


def test_a_reopened_store_holds_everything(tmp_path: Path) -> None:
    store = InProcessStore.open(tmp_path)
    store.upsert_tools([a, b, c])
    store.upsert_edges([edge(a, b, EdgeKind.STRONG_DEP, 0.7, resource="id", origin="schema")])
    store.set_availability({c.id: 0.9})
    again = InProcessStore.open(tmp_path)
    assert again.list_tools() == store.list_tools()
    assert again.edges() == store.edges()
    assert [n.name for n in neighbors(again, [a.id])] == ["beta"]
    got = again.get_tool(c.id)
    assert got is not None
    assert got.availability == 0.9


def test_a_failed_write_leaves_file_and_memory_as_they_were(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = InProcessStore.open(tmp_path)
    store.upsert_tools([a])
    before = (tmp_path / FILE_NAME).read_bytes()

    def disk_full(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", disk_full)
    with pytest.raises(OSError, match="No space"):
        store.upsert_tools([b, c])
    monkeypatch.undo()
    assert (tmp_path / FILE_NAME).read_bytes() == before
    assert [t.name for t in store.list_tools()] == ["alpha"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [FILE_NAME, LOCK_NAME]  # no temporary
    assert [t.name for t in InProcessStore.open(tmp_path).list_tools()] == ["alpha"]


def test_a_refused_batch_does_not_touch_the_file(tmp_path: Path) -> None:
    store = InProcessStore.open(tmp_path)
    store.upsert_tools([a])
    before = (tmp_path / FILE_NAME).read_bytes()
    with pytest.raises(InvalidItem):
        store.upsert_tools([b, make_tool("alpha", group="elsewhere")])
    assert (tmp_path / FILE_NAME).read_bytes() == before


def test_a_corrupt_file_is_reported_not_ignored(tmp_path: Path) -> None:
    (tmp_path / FILE_NAME).write_text("TOOLGRAPH-STORE\nbroken")
    with pytest.raises(StoreUnavailable, match=FILE_NAME):
        InProcessStore.open(tmp_path)
