"""A configured pack as catalog tools: what the database and knowledge-graph packs share.

Each configured database or graph (its ``name``) gives one tool per :class:`ToolSpec`,
``<name>_<suffix>``, with a ``builtin:<tool>`` endpoint, in the group
``<category>_<name>`` and the category ``category``; the specs go through graph_store's
own OpenAI adapter, like any imported catalog.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, Protocol, TypeVar

from pydantic import JsonValue

from graph_store.ingest.openai_spec import parse_openai
from graph_store.models import Endpoint, Tool
from proxy.tools.builtin import BUILTIN_SCHEME, ChoicePaths, PythonTool


class Named(Protocol):
    """What a pack's tools run on: one open database or graph."""

    @property
    def name(self) -> str: ...


T = TypeVar("T", bound=Named)


@dataclass(frozen=True, slots=True)
class ToolSpec(Generic[T]):
    """One tool of a pack; ``{what}`` in the description names the database or graph."""

    suffix: str
    function: Callable[[T, Mapping[str, JsonValue]], Awaitable[JsonValue]]
    description: str
    properties: dict[str, JsonValue]
    required: tuple[str, ...] = ()
    example: JsonValue = None
    choices: ChoicePaths = field(default_factory=dict)  # where earlier outputs list its values


def pack_tools(
    category: str,
    name: str,
    description: str,
    specs: Sequence[ToolSpec[T]],
    appended: Mapping[str, str] | None = None,
) -> list[Tool]:
    """The tools of the one configured ``name`` (``description``: what it holds);
    ``appended`` adds text to the descriptions of the tools it names by suffix."""
    appended = appended or {}
    group = f"{category}_{name}"
    what = f"{name} {category.replace('_', ' ')}"
    if description:
        what += f" ({description.rstrip('.')})"
    openai_specs: list[dict[str, JsonValue]] = [
        {
            "name": f"{name}_{spec.suffix}",
            "description": spec.description.format(what=what) + appended.get(spec.suffix, ""),
            "x-group": group,
            "x-category": category,
            "parameters": {
                "type": "object",
                "properties": spec.properties,
                "required": list(spec.required),
            },
        }
        for spec in specs
    ]
    parsed = parse_openai(Path(f"packs/{group}.json"), {"tools": openai_specs})
    if parsed.errors:
        pack = category.replace("_", "-")
        raise RuntimeError(f"the {pack} pack's specs are invalid: {parsed.errors}")
    examples = {f"{name}_{spec.suffix}": spec.example for spec in specs}
    return [
        tool.model_copy(
            update={
                "endpoint": Endpoint(method="POST", url=f"{BUILTIN_SCHEME}{tool.name}"),
                "response_example": examples[tool.name],
            }
        )
        for tool in parsed.tools
    ]


def pack_functions(targets: Iterable[T], specs: Sequence[ToolSpec[T]]) -> dict[str, PythonTool]:
    """Each target's tools by catalog name, bound to it, for the executor."""
    return {
        f"{target.name}_{spec.suffix}": _bound(spec.function, target)
        for target in targets
        for spec in specs
    }


def pack_choices(targets: Iterable[T], specs: Sequence[ToolSpec[T]]) -> dict[str, ChoicePaths]:
    """Each target's tools by catalog name: where their parameters' values are listed in
    earlier outputs (the argument writer numbers them: :mod:`proxy.execute.choices`)."""
    return {
        f"{target.name}_{spec.suffix}": spec.choices
        for target in targets
        for spec in specs
        if spec.choices
    }


def _bound(
    function: Callable[[T, Mapping[str, JsonValue]], Awaitable[JsonValue]], target: T
) -> PythonTool:
    async def call(arguments: Mapping[str, JsonValue]) -> JsonValue:
        return await function(target, arguments)

    return call
