"""What every graph backend answers: the questions the pack's tools ask of a graph.

Entities are ids (an IRI in RDF, an element id in Neo4j); relations lead from an
entity to other entities, ``^relation`` the other way; attributes are values (RDF
literals, node properties). Each backend builds its queries from constant text and
parameters or escaped terms, never from the model's words pasted in, and translates
its driver's errors into :class:`~proxy.errors.ToolError` where they enter.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from pydantic import JsonValue

INVERSE = "^"  # a relation followed backwards: ^capital_of from France reaches Paris
MAX_LISTED = 1000  # relations or attributes one call lists


@dataclass(frozen=True, slots=True)
class Extreme:
    """The highest (or lowest) value of an attribute over a set, and who holds it."""

    value: JsonValue
    ids: tuple[str, ...]


class GraphBackend(Protocol):
    """One graph, read-only. ``ids`` are entity ids the backend itself returned."""

    async def find_entities(self, name: str, limit: int) -> list[str]:
        """Entities whose name is ``name`` (any case), else whose name contains it."""
        ...

    async def labels(self, ids: Sequence[str]) -> dict[str, str]:
        """The names of those of ``ids`` that have one."""
        ...

    async def relations(self, ids: Sequence[str]) -> list[str]:
        """The relations from or (``^``) to any of ``ids`` that lead to entities."""
        ...

    async def neighbors(self, ids: Sequence[str], relation: str, limit: int) -> list[str]:
        """The entities ``relation`` leads to from any of ``ids``."""
        ...

    async def attributes(self, ids: Sequence[str]) -> dict[str, JsonValue]:
        """The attributes any of ``ids`` has, each with one example value."""
        ...

    async def extreme(self, ids: Sequence[str], attribute: str, highest: bool) -> Extreme | None:
        """The entities of ``ids`` with the highest (lowest) ``attribute``; None: no values."""
        ...

    async def aclose(self) -> None: ...
