"""The embedded backend: the catalog and graph in process, persisted to one file.

Every mutating call ends by writing the whole store to a temporary file in the same
directory, fsyncing it and renaming it over ``graph.json``: a crash or a failed write
leaves the previous file whole, and the in-memory state is rolled back to match it.
Edges are written as parallel arrays (source index, target index, kind, weight…) so the
file stays compact and loads with one ``orjson`` parse.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import orjson
from pydantic import TypeAdapter, ValidationError

from graph_store.errors import InvalidItem, StoreUnavailable
from graph_store.models import (
    Category,
    Direction,
    Edge,
    EdgeKind,
    Tool,
    ToolGroup,
    ToolRef,
)

FILE_NAME = "graph.json"
FORMAT_VERSION = 1
_TOOLS = TypeAdapter(list[Tool])
_KINDS = list(EdgeKind)

EdgeKey = tuple[str, str, EdgeKind]


class InProcessStore:
    """A :class:`~graph_store.store.GraphStore` in memory, saved under ``directory``."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory
        self._tools: dict[str, Tool] = {}
        self._keys: dict[str, str] = {}  # name or alias -> id
        self._edges: dict[EdgeKey, Edge] = {}
        self._out: dict[str, dict[EdgeKey, Edge]] = {}
        self._in: dict[str, dict[EdgeKey, Edge]] = {}

    @classmethod
    def open(cls, directory: Path) -> InProcessStore:
        store = cls(directory)
        path = directory / FILE_NAME
        if path.exists():
            store._load(path)
        return store

    # --- catalog -----------------------------------------------------------------

    def upsert_tools(self, tools: Sequence[Tool]) -> None:
        with self._transaction():
            for tool in tools:
                self._check_name(tool)
                old = self._tools.get(tool.id)
                if old is not None:
                    self._unindex(old)
                self._tools[tool.id] = tool
                self._index(tool)

    def delete_tools(self, ids: Collection[str]) -> int:
        present = [tool_id for tool_id in ids if tool_id in self._tools]
        if not present:
            return 0
        with self._transaction():
            for tool_id in present:
                self._unindex(self._tools.pop(tool_id))
                for key in [*self._out.get(tool_id, {}), *self._in.get(tool_id, {})]:
                    self._drop_edge(key)
        return len(present)

    def get_tool(self, key: str) -> Tool | None:
        tool = self._tools.get(key)
        if tool is None and key in self._keys:
            tool = self._tools[self._keys[key]]
        return tool

    def list_tools(self, category: str | None = None) -> list[Tool]:
        tools = (t for t in self._tools.values() if category is None or t.category == category)
        return sorted(tools, key=lambda t: t.name)

    def count_tools(self) -> int:
        return len(self._tools)

    def groups(self) -> list[ToolGroup]:
        found: dict[str, ToolGroup] = {}
        for tool in self._tools.values():
            if tool.group_id not in found or tool.group_description:
                found[tool.group_id] = _group(tool)
        return [found[key] for key in sorted(found)]

    def categories(self) -> list[Category]:
        return [Category(name=name) for name in sorted({t.category for t in self._tools.values()})]

    def group_of(self, tool_id: str) -> ToolGroup | None:
        tool = self._tools.get(tool_id)
        if tool is None:
            return None
        # The group's description is that of whichever member carries one.
        for other in self._tools.values():
            if other.group_id == tool.group_id and other.group_description:
                return _group(other)
        return _group(tool)

    def set_availability(self, scores: Mapping[str, float]) -> None:
        with self._transaction():
            for tool_id, score in scores.items():
                if tool_id in self._tools:
                    data = {**self._tools[tool_id].model_dump(), "availability": score}
                    self._tools[tool_id] = Tool.model_validate(data)

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
        index = self._out if direction == "out" else self._in
        rows: list[tuple[Edge, ToolRef]] = []
        for tool_id in tool_ids:
            for edge in index.get(tool_id, {}).values():
                if edge.kind in kinds:
                    other = edge.dst if direction == "out" else edge.src
                    rows.append((edge, self._tools[other]))
        return rows

    def clear(self) -> None:
        with self._transaction():
            self._tools, self._keys, self._edges, self._out, self._in = {}, {}, {}, {}, {}

    def close(self) -> None:
        """Nothing to release: every change is on disk already."""

    # --- internals ---------------------------------------------------------------

    def _check_name(self, tool: Tool) -> None:
        for key in (tool.name, *tool.aliases):
            owner = self._keys.get(key, tool.id)
            if owner != tool.id and key == tool.name:
                raise InvalidItem(
                    tool.provenance.file,
                    tool.original_name,
                    f"name {tool.name!r} is already taken by tool {owner}",
                )

    def _index(self, tool: Tool) -> None:
        for alias in tool.aliases:
            self._keys.setdefault(alias, tool.id)
        self._keys[tool.name] = tool.id

    def _unindex(self, tool: Tool) -> None:
        for key in (tool.name, *tool.aliases):
            if self._keys.get(key) == tool.id:
                del self._keys[key]

    def _put_edges(self, edges: Sequence[Edge]) -> None:
        for edge in edges:
            for end in (edge.src, edge.dst):
                if end not in self._tools:
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
        saved = (
            dict(self._tools),
            dict(self._keys),
            dict(self._edges),
            {k: dict(v) for k, v in self._out.items()},
            {k: dict(v) for k, v in self._in.items()},
        )
        try:
            yield
            self._save()
        except BaseException:
            self._tools, self._keys, self._edges, self._out, self._in = saved
            raise

    def _save(self) -> None:
        if self.directory is None:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        ids = list(self._tools)
        position = {tool_id: i for i, tool_id in enumerate(ids)}
        edges = list(self._edges.values())
        body = orjson.dumps(
            {
                "version": FORMAT_VERSION,
                "tools": [tool.model_dump(mode="json") for tool in self._tools.values()],
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
        _write_atomically(self.directory / FILE_NAME, body)

    def _load(self, path: Path) -> None:
        try:
            data = orjson.loads(path.read_bytes())
            tools = _TOOLS.validate_python(data["tools"])
            columns = data["edges"]
        except (OSError, orjson.JSONDecodeError, ValidationError, KeyError, TypeError) as exc:
            raise StoreUnavailable(f"cannot read the graph file {path}: {exc}") from exc
        for tool in tools:
            self._tools[tool.id] = tool
            self._index(tool)
        ids = [tool.id for tool in tools]
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


def _group(tool: Tool) -> ToolGroup:
    return ToolGroup(
        id=tool.group_id,
        name=tool.group,
        category=tool.category,
        description=tool.group_description,
    )


def _write_atomically(path: Path, body: bytes) -> None:
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(body)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
