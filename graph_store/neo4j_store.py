"""The production backend: Neo4j over Bolt with the official driver.

Writes are batched ``UNWIND … MERGE`` inside one managed transaction per call, so a
call is stored whole or not at all. Only common Cypher is used (no APOC, no GDS, no
pattern predicates in ``WHERE``), which is also what ArcadeDB's Bolt server, the one the
tests run against, accepts. A tool's full record is kept as JSON in ``t.data``; the
fields queries filter on are plain properties beside it.

The URI carries the credentials and the database: ``bolt://user:password@host:7687/db``
(database ``neo4j`` when the path is empty).

Every write also sets a fresh random value on one ``CatalogStamp`` node, in the same
transaction: that value is the store's :meth:`~Neo4jStore.version`, which replicas
sharing the server compare to notice each other's writes.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import Any, LiteralString, TypeVar
from urllib.parse import unquote, urlsplit, urlunsplit

import neo4j
from neo4j import GraphDatabase, ManagedTransaction
from neo4j.exceptions import ConstraintError, DriverError, Neo4jError

from graph_store.errors import InvalidItem, StoreUnavailable
from graph_store.models import (
    Category,
    Direction,
    Edge,
    EdgeKind,
    Tool,
    ToolGroup,
    ToolRef,
    ToolStub,
)

BATCH = 1000
_T = TypeVar("_T")

_SCHEMA: tuple[LiteralString, ...] = (
    "CREATE CONSTRAINT tool_id IF NOT EXISTS FOR (t:Tool) REQUIRE t.id IS UNIQUE",
    "CREATE CONSTRAINT tool_name IF NOT EXISTS FOR (t:Tool) REQUIRE t.name IS UNIQUE",
    "CREATE CONSTRAINT group_id IF NOT EXISTS FOR (g:ToolGroup) REQUIRE g.id IS UNIQUE",
    "CREATE CONSTRAINT category_name IF NOT EXISTS FOR (c:Category) REQUIRE c.name IS UNIQUE",
    "CREATE INDEX tool_category IF NOT EXISTS FOR (t:Tool) ON (t.category)",
)

_UPSERT_TOOLS: LiteralString = """
UNWIND $rows AS r
MERGE (t:Tool {id: r.id})
SET t.name = r.name, t.category = r.category, t.group_id = r.group_id,
    t.aliases = r.aliases, t.data = r.data
MERGE (c:Category {name: r.category})
MERGE (g:ToolGroup {id: r.group_id})
SET g.name = r.group, g.category = r.category,
    g.description = CASE WHEN r.group_description = '' THEN coalesce(g.description, '')
                         ELSE r.group_description END
MERGE (g)-[:IN_CATEGORY]->(c)
MERGE (t)-[:IN_GROUP]->(g)
"""

_DROP_OLD_MEMBERSHIP: LiteralString = """
UNWIND $rows AS r
MATCH (t:Tool {id: r.id})-[m:IN_GROUP]->(g:ToolGroup)
WHERE g.id <> r.group_id
DELETE m
"""

_DROP_EMPTY_GROUPS: LiteralString = """
MATCH (g:ToolGroup)
OPTIONAL MATCH (g)<-[m:IN_GROUP]-(:Tool)
WITH g, count(m) AS members
WHERE members = 0
DETACH DELETE g
"""

_DROP_EMPTY_CATEGORIES: LiteralString = """
MATCH (c:Category)
OPTIONAL MATCH (c)<-[m:IN_CATEGORY]-(:ToolGroup)
WITH c, count(m) AS members
WHERE members = 0
DETACH DELETE c
"""

_EDGE_FIELDS: LiteralString = (
    "a.id AS src, b.id AS dst, type(e) AS kind, e.weight AS weight, e.count AS count, "
    "e.resource AS resource, e.origin AS origin, e.reason AS reason"
)

_MERGE_EDGES: dict[EdgeKind, LiteralString] = {
    EdgeKind.SEQUENTIAL: """
UNWIND $rows AS r MATCH (a:Tool {id: r.src}) MATCH (b:Tool {id: r.dst})
MERGE (a)-[e:SEQUENTIAL]->(b)
SET e.weight = r.weight, e.count = r.count, e.resource = r.resource,
    e.origin = r.origin, e.reason = r.reason
""",
    EdgeKind.STRONG_DEP: """
UNWIND $rows AS r MATCH (a:Tool {id: r.src}) MATCH (b:Tool {id: r.dst})
MERGE (a)-[e:STRONG_DEP]->(b)
SET e.weight = r.weight, e.count = r.count, e.resource = r.resource,
    e.origin = r.origin, e.reason = r.reason
""",
    EdgeKind.WEAK_DEP: """
UNWIND $rows AS r MATCH (a:Tool {id: r.src}) MATCH (b:Tool {id: r.dst})
MERGE (a)-[e:WEAK_DEP]->(b)
SET e.weight = r.weight, e.count = r.count, e.resource = r.resource,
    e.origin = r.origin, e.reason = r.reason
""",
}

_CLEAR: tuple[LiteralString, ...] = (
    "MATCH (n:Tool) DETACH DELETE n",
    "MATCH (n:ToolGroup) DETACH DELETE n",
    "MATCH (n:Category) DETACH DELETE n",
)

_STAMP: LiteralString = "MERGE (s:CatalogStamp {key: 'catalog'}) SET s.value = $value"
_READ_STAMP: LiteralString = "MATCH (s:CatalogStamp {key: 'catalog'}) RETURN s.value AS value"

_GRAPH_EDGE: LiteralString = "[e:SEQUENTIAL|STRONG_DEP|WEAK_DEP]"


def bolt_target(uri: str) -> tuple[str, tuple[str, str], str]:
    """``bolt://user:password@host:port/database`` as (address, auth, database)."""
    parts = urlsplit(uri)
    auth = (unquote(parts.username or "neo4j"), unquote(parts.password or ""))
    netloc = parts.hostname or "localhost"
    if parts.port:
        netloc += f":{parts.port}"
    address = urlunsplit((parts.scheme, netloc, "", "", ""))
    return address, auth, parts.path.strip("/") or "neo4j"


class Neo4jStore:
    """A :class:`~graph_store.store.GraphStore` in a Neo4j (or Bolt-compatible) server."""

    def __init__(self, driver: neo4j.Driver, database: str) -> None:
        self._driver = driver
        self._database = database
        self._run_write(
            lambda tx: [tx.run(statement).consume() for statement in _SCHEMA], stamp=False
        )

    @classmethod
    def from_uri(cls, uri: str, retry_seconds: float = 15.0) -> Neo4jStore:
        """Connect; a query that meets a lost connection is retried for ``retry_seconds``."""
        address, auth, database = bolt_target(uri)
        driver = GraphDatabase.driver(
            address,
            auth=auth,
            connection_timeout=10.0,
            max_transaction_retry_time=retry_seconds,
        )
        try:
            return cls(driver, database)
        except BaseException:
            driver.close()
            raise

    # --- catalog -----------------------------------------------------------------

    def upsert_tools(self, tools: Sequence[Tool]) -> None:
        rows = [_tool_row(tool) for tool in tools]

        def work(tx: ManagedTransaction) -> None:
            for batch in _batches(rows):
                tx.run(_DROP_OLD_MEMBERSHIP, rows=batch).consume()
                tx.run(_UPSERT_TOOLS, rows=batch).consume()
            tx.run(_DROP_EMPTY_GROUPS).consume()
            tx.run(_DROP_EMPTY_CATEGORIES).consume()

        try:
            self._run_write(work)
        except ConstraintError as exc:
            raise InvalidItem("tools", "batch", f"a tool name is already taken: {exc}") from exc

    def delete_tools(self, ids: Collection[str]) -> int:
        def work(tx: ManagedTransaction) -> int:
            found = tx.run(
                "UNWIND $ids AS i MATCH (t:Tool {id: i}) RETURN count(t) AS n", ids=list(ids)
            ).single()
            tx.run("UNWIND $ids AS i MATCH (t:Tool {id: i}) DETACH DELETE t", ids=list(ids))
            tx.run(_DROP_EMPTY_GROUPS).consume()
            tx.run(_DROP_EMPTY_CATEGORIES).consume()
            return int(found["n"]) if found else 0

        return self._run_write(work)

    def get_tool(self, key: str) -> Tool | None:
        records = self._read(
            "MATCH (t:Tool) WHERE t.id = $key OR t.name = $key RETURN t.data AS data", key=key
        )
        if not records:
            records = self._read(
                "MATCH (t:Tool) WHERE $key IN t.aliases RETURN t.data AS data ORDER BY t.id",
                key=key,
            )
        if not records:
            return None
        # An exact id wins over a name, a name over an alias, as in the in-process store.
        tools = [Tool.model_validate_json(record["data"]) for record in records]
        return next((t for t in tools if t.id == key), tools[0])

    def list_tools(self, category: str | None = None) -> list[Tool]:
        if category is None:
            records = self._read("MATCH (t:Tool) RETURN t.data AS data")
        else:
            records = self._read(
                "MATCH (t:Tool) WHERE t.category = $category RETURN t.data AS data",
                category=category,
            )
        tools = [Tool.model_validate_json(record["data"]) for record in records]
        return sorted(tools, key=lambda t: t.name)

    def names(self) -> dict[str, str]:
        records = self._read("MATCH (t:Tool) RETURN t.name AS name, t.id AS id")
        return {record["name"]: record["id"] for record in records}

    def count_tools(self) -> int:
        records = self._read("MATCH (t:Tool) RETURN count(t) AS n")
        return int(records[0]["n"])

    def groups(self) -> list[ToolGroup]:
        records = self._read(
            "MATCH (g:ToolGroup) RETURN g.id AS id, g.name AS name, g.category AS category, "
            "g.description AS description"
        )
        return sorted((ToolGroup(**record.data()) for record in records), key=lambda g: g.id)

    def categories(self) -> list[Category]:
        records = self._read("MATCH (c:Category) RETURN c.name AS name")
        return sorted((Category(name=record["name"]) for record in records), key=lambda c: c.name)

    def group_of(self, tool_id: str) -> ToolGroup | None:
        records = self._read(
            "MATCH (t:Tool {id: $id})-[:IN_GROUP]->(g:ToolGroup) RETURN g.id AS id, "
            "g.name AS name, g.category AS category, g.description AS description",
            id=tool_id,
        )
        return ToolGroup(**records[0].data()) if records else None

    def set_availability(self, scores: Mapping[str, float]) -> None:
        records = self._read(
            "UNWIND $ids AS i MATCH (t:Tool {id: i}) RETURN t.data AS data", ids=list(scores)
        )
        tools = [Tool.model_validate_json(record["data"]) for record in records]
        self.upsert_tools(
            [Tool.model_validate({**t.model_dump(), "availability": scores[t.id]}) for t in tools]
        )

    # --- graph -------------------------------------------------------------------

    def upsert_edges(self, edges: Sequence[Edge]) -> None:
        self._run_write(lambda tx: self._put_edges(tx, edges))

    def replace_edges(self, origin: str, edges: Sequence[Edge]) -> None:
        def work(tx: ManagedTransaction) -> None:
            tx.run(
                f"MATCH (:Tool)-{_GRAPH_EDGE}->(:Tool) WHERE e.origin = $origin DELETE e",
                origin=origin,
            ).consume()
            self._put_edges(tx, edges)

        self._run_write(work)

    def edges(self, kind: EdgeKind | None = None) -> list[Edge]:
        records = self._read(
            f"MATCH (a:Tool)-{_GRAPH_EDGE}->(b:Tool) WHERE $kind IS NULL OR type(e) = $kind "
            f"RETURN {_EDGE_FIELDS}",
            kind=kind.value if kind else None,
        )
        found = [_edge(record.data()) for record in records]
        return sorted(found, key=lambda e: (e.src, e.dst, e.kind.value))

    def edge_rows(
        self, tool_ids: Collection[str], kinds: Collection[EdgeKind], direction: Direction
    ) -> list[tuple[Edge, ToolRef]]:
        near, far = ("a", "b") if direction == "out" else ("b", "a")
        records = self._read(
            f"MATCH (a:Tool)-{_GRAPH_EDGE}->(b:Tool) "
            f"WHERE {near}.id IN $ids AND type(e) IN $kinds "
            f"RETURN {_EDGE_FIELDS}, {far}.name AS other_name, {far}.category AS other_category",
            ids=list(tool_ids),
            kinds=[kind.value for kind in kinds],
        )
        rows: list[tuple[Edge, ToolRef]] = []
        for record in records:
            data = record.data()
            edge = _edge(data)
            other = edge.dst if direction == "out" else edge.src
            rows.append((edge, ToolStub(other, data["other_name"], data["other_category"])))
        return rows

    def clear(self) -> None:
        def work(tx: ManagedTransaction) -> None:
            for statement in _CLEAR:
                tx.run(statement).consume()

        self._run_write(work)

    def version(self) -> str:
        records = self._read(_READ_STAMP)
        return str(records[0]["value"]) if records else ""

    def refresh(self) -> None:
        """Nothing to take in: every read goes to the server."""

    def close(self) -> None:
        self._driver.close()

    # --- internals ---------------------------------------------------------------

    def _put_edges(self, tx: ManagedTransaction, edges: Sequence[Edge]) -> None:
        ends = sorted({end for edge in edges for end in (edge.src, edge.dst)})
        found = {
            record["id"]
            for record in tx.run(
                "UNWIND $ids AS i MATCH (t:Tool {id: i}) RETURN t.id AS id", ids=ends
            )
        }
        for edge in edges:
            for end in (edge.src, edge.dst):
                if end not in found:
                    raise InvalidItem("edges", f"{edge.src}->{edge.dst}", f"no tool {end}")
        for kind in EdgeKind:
            rows = [edge.model_dump(mode="json") for edge in edges if edge.kind == kind]
            for batch in _batches(rows):
                tx.run(_MERGE_EDGES[kind], rows=batch).consume()

    def _read(self, query: LiteralString, **params: Any) -> list[neo4j.Record]:
        try:
            records, _, _ = self._driver.execute_query(
                query, params, database_=self._database, routing_=neo4j.RoutingControl.READ
            )
        except (DriverError, OSError) as exc:
            raise StoreUnavailable(f"Neo4j is unreachable: {exc}") from exc
        except Neo4jError as exc:
            raise StoreUnavailable(f"Neo4j refused a query: {exc.message}") from exc
        return records

    def _run_write(self, work: Callable[[ManagedTransaction], _T], stamp: bool = True) -> _T:
        """Run ``work`` in one write transaction that also bumps the catalog stamp (a
        schema change cannot share its transaction with a data write)."""

        def stamped(tx: ManagedTransaction) -> _T:
            result = work(tx)
            tx.run(_STAMP, value=uuid.uuid4().hex).consume()
            return result

        try:
            with self._driver.session(database=self._database) as session:
                return session.execute_write(stamped if stamp else work)
        except ConstraintError:
            raise
        except (DriverError, OSError) as exc:
            raise StoreUnavailable(f"Neo4j is unreachable: {exc}") from exc
        except Neo4jError as exc:
            raise StoreUnavailable(f"Neo4j refused a write: {exc.message}") from exc


def _tool_row(tool: Tool) -> dict[str, Any]:
    return {
        "id": tool.id,
        "name": tool.name,
        "category": tool.category,
        "group": tool.group,
        "group_id": tool.group_id,
        "group_description": tool.group_description,
        "aliases": list(tool.aliases),
        "data": tool.model_dump_json(),
    }


def _edge(data: Mapping[str, Any]) -> Edge:
    return Edge(
        src=data["src"],
        dst=data["dst"],
        kind=EdgeKind(data["kind"]),
        weight=float(data["weight"]),
        count=int(data["count"] or 0),
        resource=data["resource"] or "",
        origin=data["origin"] or "",
        reason=data["reason"] or "",
    )


def _batches(rows: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    for start in range(0, len(rows), BATCH):
        yield rows[start : start + BATCH]
