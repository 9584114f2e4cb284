"""How SPARQL text reaches a graph: the embedded Oxigraph store, or an endpoint by URL.

Both take one SELECT and give rows of :class:`Term`; both refuse, before anything is
sent, a text that does not parse as a SPARQL query (an UPDATE does not: ``INSERT``,
``DELETE``, ``LOAD``, ``CLEAR``, ``DROP`` are refused by :func:`check_query`). Behind
that, nothing could write anyway: the embedded store is a private in-memory copy of a
file or a directory opened with ``Store.read_only``, and an endpoint is asked through
the SPARQL protocol's query operation, which carries no update.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

import httpx
import pyoxigraph

from proxy.errors import ToolError, ToolInputRejected, ToolTimeout
from proxy.tools.packs.pool import in_pack_thread

_XSD = "http://www.w3.org/2001/XMLSchema#"
_INTEGERS = frozenset(
    _XSD + name
    for name in [
        "integer",
        "int",
        "long",
        "short",
        "byte",
        "nonNegativeInteger",
        "positiveInteger",
        "negativeInteger",
        "nonPositiveInteger",
        "unsignedInt",
        "unsignedLong",
        "unsignedShort",
        "unsignedByte",
    ]
)
_DECIMALS = frozenset({_XSD + "decimal", _XSD + "double", _XSD + "float"})
_ERROR_CHARS = 300


@dataclass(frozen=True, slots=True)
class Term:
    """An RDF term as a result row holds it."""

    kind: Literal["iri", "literal", "bnode"]
    value: str
    datatype: str = ""

    def json(self) -> str | int | float | bool:
        """A literal as JSON: numbers and booleans typed, the rest its text."""
        try:
            if self.datatype in _INTEGERS:
                return int(self.value)
            if self.datatype in _DECIMALS:
                return float(self.value)
        except ValueError:
            return self.value
        if self.datatype == _XSD + "boolean":
            return self.value in ("true", "1")
        return self.value


Row = dict[str, Term]


class SparqlTransport(Protocol):
    async def select(self, query: str) -> list[Row]: ...

    async def aclose(self) -> None: ...


_PARSER = pyoxigraph.Store()  # empty: evaluating on it only checks that a text is a query


def check_query(query: str) -> None:
    """Refuse anything but a SPARQL query (an update does not parse as one)."""
    try:
        _PARSER.query(query)
    except SyntaxError as exc:
        raise ToolInputRejected(f"only a SPARQL query may run here: {exc}") from None


class EmbeddedStore:
    """Oxigraph in process: a file of triples loaded into memory, or a store directory
    opened read-only. Each query runs in a worker thread."""

    def __init__(self, store: pyoxigraph.Store, timeout: float) -> None:
        self._store = store
        self._timeout = timeout

    @classmethod
    def open(cls, path: Path, timeout: float) -> EmbeddedStore:
        if path.is_dir():
            return cls(pyoxigraph.Store.read_only(str(path)), timeout)
        kind = pyoxigraph.RdfFormat.from_extension(path.suffix.lstrip("."))
        if kind is None:
            raise ToolError(f"{path}: not a file of triples this store reads (by its extension)")
        store = pyoxigraph.Store()
        store.bulk_load(path=str(path), format=kind)
        return cls(store, timeout)

    async def select(self, query: str) -> list[Row]:
        check_query(query)
        try:
            async with asyncio.timeout(self._timeout):
                return await in_pack_thread(self._select, query)
        except TimeoutError:
            raise ToolTimeout(f"the graph query ran past {self._timeout:g} s") from None

    def _select(self, query: str) -> list[Row]:
        try:
            solutions = self._store.query(query, use_default_graph_as_union=True)
            if not isinstance(solutions, pyoxigraph.QuerySolutions):
                raise ToolError("the graph query is not a SELECT")
            names = [variable.value for variable in solutions.variables]
            return [_row(names, solution) for solution in solutions]
        except (OSError, SyntaxError) as exc:
            raise ToolError(f"the graph store failed: {exc}") from None

    async def aclose(self) -> None:
        return None


def _row(names: list[str], solution: pyoxigraph.QuerySolution) -> Row:
    row: Row = {}
    for name in names:
        term = solution[name]
        if isinstance(term, pyoxigraph.NamedNode):
            row[name] = Term("iri", term.value)
        elif isinstance(term, pyoxigraph.Literal):
            row[name] = Term("literal", term.value, term.datatype.value)
        elif isinstance(term, pyoxigraph.BlankNode):
            row[name] = Term("bnode", term.value)
    return row


class SparqlEndpoint:
    """A SPARQL 1.1 endpoint over HTTP: the protocol's query operation (a POSTed form),
    results as SPARQL JSON."""

    def __init__(self, url: str, timeout: float, client: httpx.AsyncClient | None = None) -> None:
        self._url = url
        self._timeout = timeout
        self._client = client or httpx.AsyncClient(timeout=timeout)

    async def select(self, query: str) -> list[Row]:
        check_query(query)
        try:
            reply = await self._client.post(
                self._url,
                data={"query": query},
                headers={"accept": "application/sparql-results+json"},
                timeout=self._timeout,
            )
        except httpx.TimeoutException:
            raise ToolTimeout(
                f"the SPARQL endpoint gave no answer in {self._timeout:g} s"
            ) from None
        except httpx.HTTPError as exc:
            raise ToolError(f"the SPARQL endpoint is unreachable: {exc}") from None
        if reply.status_code >= 400:
            raise ToolError(
                f"the SPARQL endpoint answered {reply.status_code}: {reply.text[:_ERROR_CHARS]}"
            )
        return _json_rows(reply)

    async def aclose(self) -> None:
        await self._client.aclose()


def _json_rows(reply: httpx.Response) -> list[Row]:
    try:
        bindings = reply.json()["results"]["bindings"]
        return [{name: _json_term(cell) for name, cell in binding.items()} for binding in bindings]
    except (ValueError, KeyError, TypeError) as exc:
        raise ToolError(f"the SPARQL endpoint's answer is not SPARQL JSON results: {exc}") from None


def _json_term(cell: dict[str, str]) -> Term:
    kind = cell["type"]
    if kind == "uri":
        return Term("iri", cell["value"])
    if kind == "bnode":
        return Term("bnode", cell["value"])
    return Term("literal", cell["value"], cell.get("datatype", _XSD + "string"))
