"""The embedded backend: the catalog and graph in process, persisted to one file.

Every mutating call ends by writing the whole store to a temporary file in the same
directory, fsyncing it and renaming it over ``graph.bin``: a crash or a failed write
leaves the previous file whole, and the in-memory state is rolled back to match it.

The file is a small JSON header (per tool only what traversal and listing need: id,
name, category, group; edges as parallel arrays of tool indexes, kinds, weights…)
followed by each tool's full record as JSON, back to back. Loading parses the header
only; a full record is parsed the first time someone asks for that tool, which is
what lets 50k tools load in well under a second.

Several processes may share the directory (``toolgraph serve --workers N``): a write
holds an exclusive ``flock`` on ``graph.lock``, first takes in the file if another
process replaced it, then writes. The file's identity (inode, modification time,
size) is the store's :meth:`~InProcessStore.version`; :meth:`~InProcessStore.refresh`
re-reads the file when it is not the one this process last read or wrote.
"""

from __future__ import annotations

import fcntl
import gc
import os
import struct
import tempfile
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from graph_store.errors import InvalidItem, StoreUnavailable
from graph_store.models import (
    Category,
    Direction,
    Edge,
    EdgeKind,
    Endpoint,
    ParamLocation,
    Provenance,
    Tool,
    ToolGroup,
    ToolRef,
)
from graph_store.names import group_id

FILE_NAME = "graph.bin"
LOCK_NAME = "graph.lock"
MAGIC = b"TOOLGRAPH-STORE\n"
FORMAT_VERSION = 1
_KINDS = list(EdgeKind)
_LENGTH = struct.Struct("<Q")

EdgeKey = tuple[str, str, EdgeKind]


@dataclass(frozen=True, slots=True)
class _Entry:
    """What the store keeps of a tool in memory; the record itself stays as JSON."""

    id: str
    name: str
    category: str
    group: str
    group_description: str
    aliases: tuple[str, ...]
    record: bytes | memoryview

    @property
    def group_id(self) -> str:
        return group_id(self.category, self.group)


class InProcessStore:
    """A :class:`~graph_store.store.GraphStore` in memory, saved under ``directory``."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory
        self._entries: dict[str, _Entry] = {}
        self._cache: dict[str, Tool] = {}
        self._keys: dict[str, str] = {}  # name or alias -> id
        self._edges: dict[EdgeKey, Edge] = {}
        self._out: dict[str, dict[EdgeKey, Edge]] = {}
        self._in: dict[str, dict[EdgeKey, Edge]] = {}
        self._adjacency: dict[tuple[str, Direction], list[tuple[Edge, ToolRef]]] = {}
        self._groups: dict[str, ToolGroup] | None = None
        self._seen: _FileId | None = None  # the file as this process last read or wrote it
        self._writes = 0  # the version of a store without a directory

    @classmethod
    def open(cls, directory: Path) -> InProcessStore:
        store = cls(directory)
        path = directory / FILE_NAME
        if path.exists():
            store._load(path)
        return store

    # --- sharing -----------------------------------------------------------------

    def version(self) -> str:
        if self.directory is None:
            return f"memory-{self._writes}"
        found = _file_id(self.directory / FILE_NAME)
        return "empty" if found is None else "-".join(map(str, found))

    def refresh(self) -> None:
        if self.directory is None or _file_id(self.directory / FILE_NAME) == self._seen:
            return
        fresh = InProcessStore.open(self.directory)
        # One assignment, so that a reader in another thread sees the old state or the
        # new one, field by field, never a half-loaded dict.
        (
            self._entries,
            self._cache,
            self._keys,
            self._edges,
            self._out,
            self._in,
            self._adjacency,
            self._groups,
            self._seen,
        ) = (
            fresh._entries,
            fresh._cache,
            fresh._keys,
            fresh._edges,
            fresh._out,
            fresh._in,
            {},
            None,
            fresh._seen,
        )

    # --- catalog -----------------------------------------------------------------

    def upsert_tools(self, tools: Sequence[Tool]) -> None:
        with self._transaction():
            for tool in tools:
                self._put_tool(tool)

    def delete_tools(self, ids: Collection[str]) -> int:
        with self._transaction():  # another process may have added or removed them
            present = [tool_id for tool_id in ids if tool_id in self._entries]
            for tool_id in present:
                self._unindex(self._entries.pop(tool_id))
                self._cache.pop(tool_id, None)
                for key in [*self._out.get(tool_id, {}), *self._in.get(tool_id, {})]:
                    self._drop_edge(key)
        return len(present)

    def get_tool(self, key: str) -> Tool | None:
        tool_id = key if key in self._entries else self._keys.get(key)
        if tool_id is None:
            return None
        tool = self._cache.get(tool_id)
        if tool is None:
            tool = self._cache[tool_id] = _saved_tool(orjson.loads(self._entries[tool_id].record))
        return tool

    def list_tools(self, category: str | None = None) -> list[Tool]:
        entries = sorted(self._entries.values(), key=lambda e: e.name)
        return [
            tool
            for entry in entries
            if category is None or entry.category == category
            if (tool := self.get_tool(entry.id)) is not None
        ]

    def names(self) -> dict[str, str]:
        return {entry.name: entry.id for entry in self._entries.values()}

    def count_tools(self) -> int:
        return len(self._entries)

    def groups(self) -> list[ToolGroup]:
        found = self._group_index()
        return [found[key] for key in sorted(found)]

    def categories(self) -> list[Category]:
        names = {entry.category for entry in self._entries.values()}
        return [Category(name=name) for name in sorted(names)]

    def group_of(self, tool_id: str) -> ToolGroup | None:
        entry = self._entries.get(tool_id)
        return None if entry is None else self._group_index()[entry.group_id]

    def _group_index(self) -> dict[str, ToolGroup]:
        """Every group by id, built once per change; its description is that of
        whichever member carries one."""
        if self._groups is None:
            found: dict[str, ToolGroup] = {}
            for entry in self._entries.values():
                if entry.group_id not in found or entry.group_description:
                    found[entry.group_id] = _group(entry)
            self._groups = found
        return self._groups

    def set_availability(self, scores: Mapping[str, float]) -> None:
        with self._transaction():
            for tool_id, score in scores.items():
                tool = self.get_tool(tool_id) if tool_id in self._entries else None
                if tool is not None:
                    self._put_tool(
                        Tool.model_validate({**tool.model_dump(), "availability": score})
                    )

    # --- graph -------------------------------------------------------------------

    def upsert_edges(self, edges: Sequence[Edge]) -> None:
        with self._transaction():
            self._put_edges(edges)

    def replace_edges(self, origin: str, edges: Sequence[Edge]) -> None:
        with self._transaction():
            for key in [key for key, edge in self._edges.items() if edge.origin == origin]:
                self._drop_edge(key)
            self._put_edges(edges)

    def edges(self, kind: EdgeKind | None = None) -> list[Edge]:
        found = (e for e in self._edges.values() if kind is None or e.kind == kind)
        return sorted(found, key=lambda e: (e.src, e.dst, e.kind.value))

    def edge_rows(
        self, tool_ids: Collection[str], kinds: Collection[EdgeKind], direction: Direction
    ) -> list[tuple[Edge, ToolRef]]:
        every_kind = len(set(kinds)) == len(_KINDS)
        rows: list[tuple[Edge, ToolRef]] = []
        for tool_id in tool_ids:
            adjacent = self._adjacent(tool_id, direction)
            rows += adjacent if every_kind else [row for row in adjacent if row[0].kind in kinds]
        return rows

    def _adjacent(self, tool_id: str, direction: Direction) -> list[tuple[Edge, ToolRef]]:
        """The edges at a tool with the tool at their other end, built once per change."""
        cached = self._adjacency.get((tool_id, direction))
        if cached is None:
            index = self._out if direction == "out" else self._in
            cached = [
                (edge, self._entries[edge.dst if direction == "out" else edge.src])
                for edge in index.get(tool_id, {}).values()
            ]
            self._adjacency[(tool_id, direction)] = cached
        return cached

    def clear(self) -> None:
        with self._transaction():
            self._entries, self._cache, self._keys = {}, {}, {}
            self._edges, self._out, self._in = {}, {}, {}

    def close(self) -> None:
        """Nothing to release: every change is on disk already."""

    # --- internals ---------------------------------------------------------------

    def _put_tool(self, tool: Tool) -> None:
        owner = self._keys.get(tool.name, tool.id)
        if owner != tool.id:
            raise InvalidItem(
                tool.provenance.file,
                tool.original_name,
                f"name {tool.name!r} is already taken by tool {owner}",
            )
        old = self._entries.get(tool.id)
        if old is not None:
            self._unindex(old)
        entry = _Entry(
            id=tool.id,
            name=tool.name,
            category=tool.category,
            group=tool.group,
            group_description=tool.group_description,
            aliases=tool.aliases,
            record=orjson.dumps(tool.model_dump(mode="json")),
        )
        self._entries[tool.id] = entry
        self._cache[tool.id] = tool
        self._index(entry)

    def _index(self, entry: _Entry) -> None:
        for alias in entry.aliases:
            self._keys.setdefault(alias, entry.id)
        self._keys[entry.name] = entry.id

    def _unindex(self, entry: _Entry) -> None:
        for key in (entry.name, *entry.aliases):
            if self._keys.get(key) == entry.id:
                del self._keys[key]

    def _put_edges(self, edges: Sequence[Edge]) -> None:
        for edge in edges:
            for end in (edge.src, edge.dst):
                if end not in self._entries:
                    raise InvalidItem("edges", f"{edge.src}->{edge.dst}", f"no tool {end}")
            self._edges[edge.key] = edge
            self._out.setdefault(edge.src, {})[edge.key] = edge
            self._in.setdefault(edge.dst, {})[edge.key] = edge

    def _drop_edge(self, key: EdgeKey) -> None:
        self._edges.pop(key, None)
        self._out.get(key[0], {}).pop(key, None)
        self._in.get(key[1], {}).pop(key, None)

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        with self._exclusive():
            self.refresh()
            with self._rollback():
                yield
                self._save()
                self._writes += 1

    @contextmanager
    def _exclusive(self) -> Iterator[None]:
        """Hold the directory's write lock: one writer at a time across processes."""
        if self.directory is None:
            yield
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        with (self.directory / LOCK_NAME).open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    @contextmanager
    def _rollback(self) -> Iterator[None]:
        saved = (
            dict(self._entries),
            dict(self._cache),
            dict(self._keys),
            dict(self._edges),
            {k: dict(v) for k, v in self._out.items()},
            {k: dict(v) for k, v in self._in.items()},
        )
        self._adjacency, self._groups = {}, None
        try:
            yield
        except BaseException:
            self._entries, self._cache, self._keys, self._edges, self._out, self._in = saved
            raise

    def _save(self) -> None:
        if self.directory is None:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        entries = list(self._entries.values())
        position = {entry.id: i for i, entry in enumerate(entries)}
        edges = list(self._edges.values())
        header = orjson.dumps(
            {
                "version": FORMAT_VERSION,
                "tools": {
                    "id": [e.id for e in entries],
                    "name": [e.name for e in entries],
                    "category": [e.category for e in entries],
                    "group": [e.group for e in entries],
                    "group_description": [e.group_description for e in entries],
                    "aliases": [e.aliases for e in entries],
                    "length": [len(e.record) for e in entries],
                },
                "edges": {
                    "src": [position[e.src] for e in edges],
                    "dst": [position[e.dst] for e in edges],
                    "kind": [_KINDS.index(e.kind) for e in edges],
                    "weight": [e.weight for e in edges],
                    "count": [e.count for e in edges],
                    "resource": [e.resource for e in edges],
                    "origin": [e.origin for e in edges],
                    "reason": [e.reason for e in edges],
                },
            }
        )
        parts = [MAGIC, _LENGTH.pack(len(header)), header, *(e.record for e in entries)]
        self._seen = _write_atomically(self.directory / FILE_NAME, parts)

    def _load(self, path: Path) -> None:
        # Loading allocates ~100k long-lived objects; cyclic GC passes over a big heap
        # meanwhile would triple the time, and nothing here makes cycles.
        collecting = gc.isenabled()
        gc.disable()
        try:
            self._read(path)
        finally:
            if collecting:
                gc.enable()

    def _read(self, path: Path) -> None:
        try:
            with path.open("rb") as file:
                # Identified by the open file, so that a replacement written meanwhile
                # is not mistaken for what was read.
                seen = _identity(os.fstat(file.fileno()))
                data = file.read()
            if not data.startswith(MAGIC):
                raise ValueError("not a toolgraph store file")
            start = len(MAGIC) + _LENGTH.size
            (size,) = _LENGTH.unpack_from(data, len(MAGIC))
            header = orjson.loads(data[start : start + size])
            if header["version"] != FORMAT_VERSION:
                raise ValueError(f"format version {header['version']!r}, not {FORMAT_VERSION}")
            self._load_tools(header["tools"], memoryview(data)[start + size :])
            self._load_edges(header["edges"])
            self._seen = seen
        except (OSError, ValueError, KeyError, TypeError, IndexError, struct.error) as exc:
            raise StoreUnavailable(f"cannot read the graph file {path}: {exc}") from exc

    def _load_tools(self, columns: dict[str, list[Any]], records: memoryview) -> None:
        if sum(columns["length"]) != len(records):
            raise ValueError("the file is truncated")
        offset = 0
        for tool_id, name, category, group, description, aliases, length in zip(
            columns["id"],
            columns["name"],
            columns["category"],
            columns["group"],
            columns["group_description"],
            columns["aliases"],
            columns["length"],
            strict=True,
        ):
            record = records[offset : offset + length]
            offset += length
            entry = _Entry(tool_id, name, category, group, description, tuple(aliases), record)
            self._entries[tool_id] = entry
            self._index(entry)

    def _load_edges(self, columns: dict[str, list[Any]]) -> None:
        ids = list(self._entries)
        self._put_edges(
            [
                Edge.model_construct(
                    src=ids[src],
                    dst=ids[dst],
                    kind=_KINDS[kind],
                    weight=weight,
                    count=count,
                    resource=resource,
                    origin=origin,
                    reason=reason,
                )
                for src, dst, kind, weight, count, resource, origin, reason in zip(
                    columns["src"],
                    columns["dst"],
                    columns["kind"],
                    columns["weight"],
                    columns["count"],
                    columns["resource"],
                    columns["origin"],
                    columns["reason"],
                    strict=True,
                )
            ]
        )


def _saved_tool(row: dict[str, Any]) -> Tool:
    # The record is this store's own writing, validated when it was stored.
    endpoint = row.get("endpoint")
    fields = {
        **row,
        "provenance": Provenance.model_construct(**row["provenance"]),
        "aliases": tuple(row["aliases"]),
        "endpoint": None
        if endpoint is None
        else Endpoint.model_construct(
            method=endpoint["method"],
            url=endpoint["url"],
            locations={k: ParamLocation(v) for k, v in endpoint["locations"].items()},
        ),
    }
    return Tool.model_construct(**fields)


def _group(entry: _Entry) -> ToolGroup:
    return ToolGroup(
        id=entry.group_id,
        name=entry.group,
        category=entry.category,
        description=entry.group_description,
    )


_FileId = tuple[int, int, int]


def _identity(stat: os.stat_result) -> _FileId:
    return (stat.st_ino, stat.st_mtime_ns, stat.st_size)


def _file_id(path: Path) -> _FileId | None:
    try:
        return _identity(path.stat())
    except FileNotFoundError:
        return None


def _write_atomically(path: Path, parts: list[bytes | memoryview]) -> _FileId:
    """Write ``path`` whole or not at all; the identity of the file written."""
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as file:
            for part in parts:
                file.write(part)
            file.flush()
            os.fsync(file.fileno())
            written = _identity(os.fstat(file.fileno()))
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
    return written
