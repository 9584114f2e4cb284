"""Entity sets a request's tool calls name ``#0``, ``#1``…, kept for the request's life.

A knowledge-graph tool that yields a set of entities (``find_entities``,
``get_neighbors``, ``intersection``, ``argmax``) stores it here and answers with its
name; a later call of the same request names it instead of repeating the entities
(the variables of "Middleware for LLMs", ../shared/METHOD.md §3). The executor makes
one :class:`Variables` per request and binds it around every call it runs
(:func:`bound_variables`), so the in-process tools keep their plain signature and two
requests never see each other's sets.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from proxy.errors import ToolError, ToolInputRejected

_NAME = re.compile(r"#(\d+)")


@dataclass(frozen=True, slots=True)
class EntitySet:
    """Entities of one graph by id; ``truncated``: the set was cut at the graph's cap."""

    graph: str
    ids: tuple[str, ...]
    truncated: bool = False


@dataclass(slots=True)
class Variables:
    """One request's entity sets, in the order they were made."""

    sets: list[EntitySet] = field(default_factory=list)

    def add(self, entities: EntitySet) -> str:
        self.sets.append(entities)
        return f"#{len(self.sets) - 1}"

    def get(self, name: str, param: str) -> EntitySet:
        """The set named ``name``; a name this request did not make is refused with
        the names it did."""
        found = _NAME.fullmatch(name.strip())
        if found is not None and int(found[1]) < len(self.sets):
            return self.sets[int(found[1])]
        made = ", ".join(f"#{i}" for i in range(len(self.sets))) or "none yet"
        raise ToolInputRejected(
            f"{param}: no variable {name!r} in this request (made so far: {made}); a "
            "variable is the name an earlier call returned, e.g. find_entities's",
            param=param,
        )


def is_variable_name(text: str) -> bool:
    return _NAME.fullmatch(text.strip()) is not None


_CURRENT: ContextVar[Variables | None] = ContextVar("toolgraph_variables", default=None)


@contextmanager
def bound_variables(variables: Variables) -> Iterator[None]:
    """Make ``variables`` the current request's for the calls inside."""
    token = _CURRENT.set(variables)
    try:
        yield
    finally:
        _CURRENT.reset(token)


def current_variables() -> Variables:
    variables = _CURRENT.get()
    if variables is None:  # a tool called outside the executor
        raise ToolError("entity variables exist only inside a request's plan")
    return variables
