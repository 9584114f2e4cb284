"""The graph backend over Bolt (Neo4j, or a server that speaks its protocol).

Every query is a constant text below; the model's words (a name, a relationship
type, a property) reach the server only as parameters, so no argument can change
what a query does. Each runs in a read transaction with a timeout, as the
configured user: Neo4j refuses writes in a read transaction, but not every
Bolt server does (ArcadeDB runs them), so the constant texts are the wall that
holds everywhere, and :func:`check_read` refuses any text with a writing clause
before it is sent. Entities are nodes by element id; a relation is a relationship
type (``^TYPE`` followed backwards), an attribute a node property.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, LiteralString

import neo4j
from neo4j.exceptions import DriverError, Neo4jError
from pydantic import JsonValue

from graph_store.neo4j_store import bolt_target
from proxy.errors import ToolError, ToolInputRejected, ToolTimeout
from proxy.tools.packs.database._values import json_value
from proxy.tools.packs.knowledge_graph.backend import INVERSE, MAX_LISTED, Extreme

_WRITES = re.compile(
    r"\b(CREATE|MERGE|DELETE|DETACH|SET|REMOVE|DROP|LOAD\s+CSV|CALL|FOREACH)\b", re.I
)
_TIES = 100

_FIND_EXACT: LiteralString = (
    "MATCH (n) WHERE toLower(toString(n[$prop])) = toLower($name) "
    "RETURN DISTINCT elementId(n) AS id LIMIT $limit"
)
_FIND_CONTAINING: LiteralString = (
    "MATCH (n) WHERE toLower(toString(n[$prop])) CONTAINS toLower($name) "
    "RETURN DISTINCT elementId(n) AS id LIMIT $limit"
)
_LABELS: LiteralString = (
    "MATCH (n) WHERE elementId(n) IN $ids AND n[$prop] IS NOT NULL "
    "RETURN elementId(n) AS id, n[$prop] AS label"
)
_OUT_TYPES: LiteralString = (
    "MATCH (n)-[r]->() WHERE elementId(n) IN $ids RETURN DISTINCT type(r) AS type LIMIT $limit"
)
_IN_TYPES: LiteralString = (
    "MATCH (n)<-[r]-() WHERE elementId(n) IN $ids RETURN DISTINCT type(r) AS type LIMIT $limit"
)
_OUT: LiteralString = (
    "MATCH (n)-[r]->(m) WHERE elementId(n) IN $ids AND type(r) = $type "
    "RETURN DISTINCT elementId(m) AS id LIMIT $limit"
)
_IN: LiteralString = (
    "MATCH (n)<-[r]-(m) WHERE elementId(n) IN $ids AND type(r) = $type "
    "RETURN DISTINCT elementId(m) AS id LIMIT $limit"
)
_KEYS: LiteralString = (
    "MATCH (n) WHERE elementId(n) IN $ids UNWIND keys(n) AS key "
    "RETURN key, collect(n[key])[0] AS example LIMIT $limit"
)
_HIGHEST: LiteralString = (
    "MATCH (n) WHERE elementId(n) IN $ids AND n[$key] IS NOT NULL "
    "RETURN elementId(n) AS id, n[$key] AS value ORDER BY value DESC LIMIT $limit"
)
_LOWEST: LiteralString = (
    "MATCH (n) WHERE elementId(n) IN $ids AND n[$key] IS NOT NULL "
    "RETURN elementId(n) AS id, n[$key] AS value ORDER BY value ASC LIMIT $limit"
)


def check_read(query: str) -> None:
    """Refuse a Cypher text with a clause that writes or calls out."""
    if found := _WRITES.search(query):
        raise ToolInputRejected(f"only reading Cypher may run here, not {found[1].upper()}")


class BoltGraph:
    """A :class:`~proxy.tools.packs.knowledge_graph.backend.GraphBackend` on a Bolt server."""

    def __init__(self, uri: str, name_property: str, timeout: float) -> None:
        address, auth, self._database = bolt_target(uri)
        self._driver = neo4j.AsyncGraphDatabase.driver(
            address, auth=auth, connection_timeout=timeout, max_transaction_retry_time=0.0
        )
        self._prop = name_property
        self._timeout = timeout

    async def find_entities(self, name: str, limit: int) -> list[str]:
        for query in (_FIND_EXACT, _FIND_CONTAINING):
            rows = await self._read(query, prop=self._prop, name=name, limit=limit)
            if rows:
                return [str(row["id"]) for row in rows]
        return []

    async def labels(self, ids: Sequence[str]) -> dict[str, str]:
        rows = await self._read(_LABELS, ids=list(ids), prop=self._prop)
        return {str(row["id"]): str(row["label"]) for row in rows}

    async def relations(self, ids: Sequence[str]) -> list[str]:
        out = await self._read(_OUT_TYPES, ids=list(ids), limit=MAX_LISTED)
        back = await self._read(_IN_TYPES, ids=list(ids), limit=MAX_LISTED)
        return sorted({str(r["type"]) for r in out} | {INVERSE + str(r["type"]) for r in back})

    async def neighbors(self, ids: Sequence[str], relation: str, limit: int) -> list[str]:
        query = _IN if relation.startswith(INVERSE) else _OUT
        kind = relation.removeprefix(INVERSE)
        rows = await self._read(query, ids=list(ids), type=kind, limit=limit)
        return [str(row["id"]) for row in rows]

    async def attributes(self, ids: Sequence[str]) -> dict[str, JsonValue]:
        rows = await self._read(_KEYS, ids=list(ids), limit=MAX_LISTED)
        return {str(row["key"]): json_value(row["example"]) for row in sorted(rows, key=_key)}

    async def extreme(self, ids: Sequence[str], attribute: str, highest: bool) -> Extreme | None:
        query = _HIGHEST if highest else _LOWEST
        rows = await self._read(query, ids=list(ids), key=attribute, limit=_TIES)
        if not rows:
            return None
        best = rows[0]["value"]
        held = tuple(dict.fromkeys(str(row["id"]) for row in rows if row["value"] == best))
        return Extreme(json_value(best), held)

    async def aclose(self) -> None:
        await self._driver.close()

    async def _read(self, query: LiteralString, **params: Any) -> list[dict[str, Any]]:
        check_read(query)

        @neo4j.unit_of_work(timeout=self._timeout)
        async def work(tx: neo4j.AsyncManagedTransaction) -> list[dict[str, Any]]:
            result = await tx.run(query, params)
            return [record.data() async for record in result]

        try:
            async with self._driver.session(
                database=self._database, default_access_mode=neo4j.READ_ACCESS
            ) as session:
                return await session.execute_read(work)
        except (DriverError, OSError) as exc:
            if "timeout" in str(exc).lower():
                raise ToolTimeout(f"the graph query ran past {self._timeout:g} s") from None
            raise ToolError(f"the Bolt server is unreachable: {exc}") from None
        except Neo4jError as exc:
            raise ToolError(f"the Bolt server refused a query: {exc.message}") from None


def _key(row: dict[str, Any]) -> str:
    return str(row["key"])
