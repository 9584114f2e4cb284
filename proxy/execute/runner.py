"""The scheduler's per-request half for catalog tools: plan node → tool call.

With an :class:`~proxy.execute.arguments.ArgumentWriter`, a node's arguments are
completed by the LLM from its sub-task and the compressed outputs of the nodes it
depends on (and any ``background``: earlier results of the conversation) before
the call; without one, they go as the plan bound them. A call whose tool and
arguments equal one in ``reuse`` (an earlier turn's calls, by :func:`call_key`)
is answered from there instead of running again.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping

from pydantic import JsonValue

from graph_store.models import Tool
from proxy import json_codec
from proxy.errors import ToolError
from proxy.execute.arguments import ArgumentWriter, NoValidArguments
from proxy.execute.compress import Compressor
from proxy.execute.invocation import ToolInvoker, tool_host
from proxy.execute.plan import PlanNode
from proxy.llm import ChatModel


class CatalogRunner:
    def __init__(
        self,
        tools: Mapping[str, Tool],
        invoker: ToolInvoker,
        *,
        writer: ArgumentWriter | None = None,
        compressor: Compressor | None = None,
        model: ChatModel | None = None,
        reuse: Mapping[str, JsonValue] | None = None,
        background: Mapping[str, str] | None = None,
    ) -> None:
        self._tools = tools
        self._invoker = invoker
        self._writer = writer
        self._compressor = compressor or Compressor(4000)
        self._model = model
        self.compressed: dict[str, str] = {}  # node id → what prompts see of its output
        self._node_tools: dict[str, Tool] = {}  # node id → its tool, learnt as nodes run
        self._reuse = reuse or {}
        self._background = background or {}
        self.attempts: dict[str, int] = {}  # node id → LLM replies read for its arguments
        self.reused: set[str] = set()  # node ids answered from an earlier turn

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
            inputs = dict(self._background)
            inputs.update(
                {dep: await self._compressed(dep, output) for dep, output in context.items()}
            )
            try:
                written = await self._writer.write(tool, node.task, arguments, inputs, self._model)
            except NoValidArguments as exc:
                self.attempts[node.id] = exc.attempts
                raise
            self.attempts[node.id] = written.attempts
            arguments.clear()
            arguments.update(written.arguments)
        earlier = self._reuse.get(call_key(tool.name, arguments), _ABSENT)
        if earlier is not _ABSENT:
            self.reused.add(node.id)
            return copy.deepcopy(earlier)
        return await self._invoker.invoke(tool, arguments)

    async def _compressed(self, node_id: str, output: JsonValue) -> str:
        if node_id not in self.compressed:
            tool = self._node_tools[node_id]  # it ran before anything that depends on it
            result = await self._compressor.compress(tool, output, self._model)
            self.compressed[node_id] = result.text
        return self.compressed[node_id]


_ABSENT: JsonValue = {"\0absent": True}


def call_key(tool: str, arguments: Mapping[str, JsonValue]) -> str:
    """One call's identity: the tool and its arguments, key order ignored."""
    return tool + "\0" + json_codec.dumps(dict(arguments), sort_keys=True).decode()
