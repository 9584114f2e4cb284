"""The scheduler's per-request half for catalog tools: plan node → tool call.

With an :class:`~proxy.execute.arguments.ArgumentWriter`, a node's arguments are
completed by the LLM from its sub-task and the compressed outputs of the nodes it
depends on before the call; without one, they go as the plan bound them.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import JsonValue

from graph_store.models import Tool
from proxy.errors import ToolError
from proxy.execute.arguments import ArgumentWriter
from proxy.execute.compress import Compressor
from proxy.execute.invocation import ToolInvoker, tool_host
from proxy.execute.llm import ChatModel
from proxy.execute.plan import PlanNode


class CatalogRunner:
    def __init__(
        self,
        tools: Mapping[str, Tool],
        invoker: ToolInvoker,
        *,
        writer: ArgumentWriter | None = None,
        compressor: Compressor | None = None,
        model: ChatModel | None = None,
    ) -> None:
        self._tools = tools
        self._invoker = invoker
        self._writer = writer
        self._compressor = compressor or Compressor(4000)
        self._model = model
        self.compressed: dict[str, str] = {}  # node id → what prompts see of its output
        self._node_tools: dict[str, Tool] = {}  # node id → its tool, learnt as nodes run

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
        tool = self.tool(node)
        self._node_tools[node.id] = tool
        if self._writer is not None:
            inputs = {dep: await self._compressed(dep, output) for dep, output in context.items()}
            written = await self._writer.write(tool, node.task, arguments, inputs, self._model)
            arguments.clear()
            arguments.update(written.arguments)
        return await self._invoker.invoke(tool, arguments)

    async def _compressed(self, node_id: str, output: JsonValue) -> str:
        if node_id not in self.compressed:
            tool = self._node_tools[node_id]  # it ran before anything that depends on it
            result = await self._compressor.compress(tool, output, self._model)
            self.compressed[node_id] = result.text
        return self.compressed[node_id]
