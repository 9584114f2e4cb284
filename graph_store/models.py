"""The catalog's records: tools, their groups and categories, and the edges between tools.

The graph is the thesis's model (METHOD.md §1): ``Category ← ToolGroup ← Tool``, and
between tools SEQUENTIAL (B seen right after A in real call paths), STRONG_DEP (an
output of A fills a required input of B) and WEAK_DEP (it fills an optional one, or B
could get it elsewhere).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator

from graph_store.names import group_id, is_valid_name

JsonSchema = dict[str, JsonValue]

#: Availability of a tool no call log has spoken for: the mean of a uniform prior.
PRIOR_AVAILABILITY = 0.5


def empty_parameters() -> JsonSchema:
    return {"type": "object", "properties": {}, "required": []}


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ParamLocation(StrEnum):
    PATH = "path"
    QUERY = "query"
    HEADER = "header"
    COOKIE = "cookie"
    BODY = "body"


class Endpoint(_Record):
    """How to call a tool over HTTP: ``url`` may hold ``{name}`` path templates."""

    method: str = "GET"
    url: str = ""
    locations: dict[str, ParamLocation] = Field(default_factory=dict)


class Provenance(_Record):
    """Where a record came from: the adapter's format, the file, the item within it."""

    format: str
    file: str = ""
    item: str = ""
    hints: dict[str, bool] = Field(
        default_factory=dict,
        description="What the source says of the tool's effects (MCP's readOnlyHint, "
        "destructiveHint, idempotentHint, openWorldHint), as it said it.",
    )


class Tool(_Record):
    id: str = Field(min_length=1)
    name: str = Field(description="OpenAI-safe, unique in the catalog.")
    original_name: str
    description: str = ""
    category: str = "uncategorised"
    group: str = Field(default="", description="RapidAPI tool / OpenAPI tag / source group.")
    group_description: str = ""
    parameters: JsonSchema = Field(default_factory=lambda: empty_parameters())
    response_schema: JsonSchema | None = None
    response_example: JsonValue = None
    endpoint: Endpoint | None = None
    provenance: Provenance
    aliases: tuple[str, ...] = Field(
        default=(), description="Other names call logs use for this tool (ToolBench's)."
    )
    availability: float = Field(default=PRIOR_AVAILABILITY, ge=0.0, le=1.0)

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        if not is_valid_name(value):
            raise ValueError(f"{value!r} is not 1-64 characters of [a-zA-Z0-9_-]")
        return value

    @property
    def group_id(self) -> str:
        return group_id(self.category, self.group)

    def required_params(self) -> list[str]:
        required = self.parameters.get("required")
        return [str(name) for name in required] if isinstance(required, list) else []

    def param_schemas(self) -> dict[str, dict[str, JsonValue]]:
        properties = self.parameters.get("properties")
        if not isinstance(properties, dict):
            return {}
        return {name: spec for name, spec in properties.items() if isinstance(spec, dict)}

    def openai_function(self) -> dict[str, JsonValue]:
        """The tool as an entry of an OpenAI ``tools`` array."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


class ToolGroup(_Record):
    id: str
    name: str
    category: str
    description: str = ""


class Category(_Record):
    name: str


class EdgeKind(StrEnum):
    # Values double as Neo4j relationship types.
    STRONG_DEP = "STRONG_DEP"
    WEAK_DEP = "WEAK_DEP"
    SEQUENTIAL = "SEQUENTIAL"

    @property
    def rank(self) -> int:
        """Preference when choosing a next tool: strong over weak over sequential."""
        return _RANK[self]


_RANK = {EdgeKind.STRONG_DEP: 0, EdgeKind.WEAK_DEP: 1, EdgeKind.SEQUENTIAL: 2}
ALL_KINDS: tuple[EdgeKind, ...] = tuple(EdgeKind)


class Edge(_Record):
    """A directed Tool→Tool edge; (src, dst, kind) is its identity."""

    src: str
    dst: str
    kind: EdgeKind
    weight: float = Field(ge=0.0, le=1.0, description="Transition share or match score.")
    count: int = Field(default=0, ge=0, description="Times seen (SEQUENTIAL).")
    resource: str = Field(default="", description="What flows along a dependency edge.")
    origin: str = Field(default="", description="What made it: calls, schema, taskbench, llm.")
    reason: str = ""

    @property
    def key(self) -> tuple[str, str, EdgeKind]:
        return (self.src, self.dst, self.kind)


Direction = Literal["out", "in"]


@dataclass(slots=True)
class Neighbor:
    """A tool reached from a set of tools over one edge.

    A plain slotted dataclass, not frozen: traversal is hot, and a frozen dataclass's
    ``__init__`` costs a third of a neighbour lookup.
    """

    tool_id: str
    name: str
    category: str
    kind: EdgeKind
    weight: float
    count: int
    resource: str
    via: str  # the id of the tool the edge joins it to


class ToolRef(Protocol):
    """What traversal needs of the tool at the other end of an edge (a Tool is one)."""

    @property
    def id(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def category(self) -> str: ...


@dataclass(frozen=True, slots=True)
class ToolStub:
    id: str
    name: str
    category: str
