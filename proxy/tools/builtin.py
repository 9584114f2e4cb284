"""In-process tools as the catalog names them: a ``builtin:<name>`` endpoint.

The executor's :class:`~proxy.execute.invocation.Invoker` routes such endpoints to
a :class:`PythonTools`; the built-in pack (:mod:`proxy.tools.packs.math.catalog`) fills one.
They live here, below the executor, so that the pack never imports it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from pydantic import JsonValue

from graph_store.models import Tool
from proxy.errors import ToolError

BUILTIN_SCHEME = "builtin:"

PythonTool = Callable[[Mapping[str, JsonValue]], Awaitable[JsonValue]]

#: Where an in-process tool's parameter takes its valid values from, by parameter: paths
#: into an earlier output of the same request, dotted field names with ``[]`` after one to
#: go through each element of a list (``tables[].name``); a path ending at a list gives
#: its elements, at an object its keys, at text the text. The argument writer offers
#: them as a numbered list (:mod:`proxy.execute.choices`).
ChoicePaths = Mapping[str, tuple[str, ...]]


@dataclass
class PythonTools:
    """In-process tools by name: each an async function of its arguments."""

    functions: dict[str, PythonTool] = field(default_factory=dict)

    async def invoke(self, tool: Tool, arguments: Mapping[str, JsonValue]) -> JsonValue:
        name = builtin_name(tool)
        function = self.functions.get(name)
        if function is None:
            raise ToolError(f"no in-process tool named {name}", param=tool.name)
        return await function(arguments)


def builtin_name(tool: Tool) -> str:
    url = tool.endpoint.url if tool.endpoint else ""
    return url.removeprefix(BUILTIN_SCHEME) if url.startswith(BUILTIN_SCHEME) else tool.name
