"""The scheduler's per-request half for catalog tools: plan node → tool call.

Arguments arrive from the plan (and its bindings); the argument-generation step
of orchestrate mode will sit in front of :meth:`CatalogRunner.run` once the
planner exists.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import JsonValue

from graph_store.models import Tool
from proxy.errors import ToolError
from proxy.execute.invocation import ToolInvoker, tool_host
from proxy.execute.plan import PlanNode


class CatalogRunner:
    def __init__(self, tools: Mapping[str, Tool], invoker: ToolInvoker) -> None:
        self._tools = tools
        self._invoker = invoker

    def tool(self, node: PlanNode) -> Tool:
        tool = self._tools.get(node.tool)
        if tool is None:
            raise ToolError(f"no tool named {node.tool} in the catalog", param=node.tool)
        return tool

    def host(self, node: PlanNode) -> str:
        tool = self._tools.get(node.tool)
        return tool_host(tool) if tool is not None else "local"

    async def run(
        self, node: PlanNode, arguments: dict[str, JsonValue], context: Mapping[str, JsonValue]
    ) -> JsonValue:
        return await self._invoker.invoke(self.tool(node), arguments)
