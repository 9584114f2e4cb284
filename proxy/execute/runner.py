"""The scheduler's per-request half for catalog tools: plan node → tool call.

With an :class:`~proxy.execute.arguments.ArgumentWriter`, a node's arguments are
completed by the LLM from its sub-task and the compressed outputs of the nodes it
depends on (and any ``background``: earlier results of the conversation) before
the call; without one, they go as the plan bound them. A call whose tool and
arguments equal one in ``reuse`` (an earlier turn's calls, by :func:`call_key`),
or one this run made already (a plan whose steps all came to the same call: a small
model's decomposition repeated one ``evaluate_expression`` step after step), is
answered from there instead of running again. Every call runs with the request's
:class:`~proxy.tools.variables.Variables` bound (the entity sets the knowledge-graph
tools name ``#0``, ``#1``…), one per runner unless the caller passes the request's own.
A tool marked destructive is not called unless the runner was told it may
(``destructive``: orchestrate mode gives it only to a request with an
``Idempotency-Key``); its call fails with :class:`~proxy.errors.DestructiveRefused`,
before anything is sent. When the tool rejects arguments
the model wrote (its input error), :meth:`CatalogRunner.revise` has them written once
more with the tool's message, and the scheduler calls again. A parameter a pack
says is drawn from earlier outputs (``choices``: its paths by tool name) is offered to
the writer as the values the calls this one depends on gave, from the same pack's
tools (one graph's variables mean nothing to another's tools): decoupled generation,
:mod:`proxy.execute.choices`.

Each output is compressed once, as its call finishes and inside the call's
timeout (the scheduler's window covers all of :meth:`CatalogRunner.run`): the
calls that depend on it and the answer read that one text, the bytes metric
counts it once, and a slow field choice delays only its own call, not the plan.
The field choice (an LLM call the first time a tool answers big) gets what is left of
the call's window less :data:`TRUNCATE_RESERVE`; when it runs out the output is
truncated instead, so a slow model costs the fields, never the tool's answer.

:attr:`CatalogRunner.tools` counts the wall time during which at least one tool
was being called (its invoker awaited; overlapping calls count once), so that a
request's trace can tell the tools' time from toolgraph's own.
"""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

from pydantic import JsonValue

from graph_store.models import Tool
from proxy import json_codec
from proxy.errors import DestructiveRefused, ToolError, ToolUnavailable
from proxy.execute.arguments import ArgumentWriter, Choices, NoValidArguments
from proxy.execute.choices import offered_choices
from proxy.execute.compress import Compressed, Compressor
from proxy.execute.invocation import ToolInvoker, tool_host
from proxy.execute.plan import PlanNode
from proxy.execute.references import scalars
from proxy.execute.scheduler import CALL_DEADLINE
from proxy.llm import ChatModel
from proxy.tools.builtin import ChoicePaths
from proxy.tools.variables import Variables, bound_variables

#: Seconds of a call's window kept for truncating its output when the field choice is slow.
TRUNCATE_RESERVE = 0.25


class InFlight:
    """The wall time during which at least one of some intervals was open: the union of
    overlapping calls, not their sum."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self.seconds = 0.0
        self._clock = clock
        self._open = 0
        self._since = 0.0

    @contextmanager
    def interval(self) -> Iterator[None]:
        if self._open == 0:
            self._since = self._clock()
        self._open += 1
        try:
            yield
        finally:
            self._open -= 1
            if self._open == 0:
                self.seconds += self._clock() - self._since


class CatalogRunner:
    """``tools``: the tools the plan may call, read already (a dict, not a catalog that
    reads a record from its store when asked): :meth:`tool` and :meth:`host` run on
    the event loop, so :meth:`ToolExecutor.execute
    <proxy.execute.service.ToolExecutor.execute>` reads the plan's tools in a worker
    thread first (:func:`~proxy.execute.service.plan_tools`)."""

    def __init__(
        self,
        tools: dict[str, Tool],
        invoker: ToolInvoker,
        *,
        writer: ArgumentWriter | None = None,
        compressor: Compressor | None = None,
        model: ChatModel | None = None,
        reuse: Mapping[str, JsonValue] | None = None,
        background: Mapping[str, str] | None = None,
        variables: Variables | None = None,
        destructive: bool = True,
        choices: Mapping[str, ChoicePaths] | None = None,
    ) -> None:
        self._tools = tools
        self._choices = choices or {}
        self._groups: dict[str, str] = {}  # node id → the group of the tool it called
        self.variables = variables if variables is not None else Variables()
        self._destructive = destructive
        self._invoker = invoker
        self._writer = writer
        self._compressor = compressor or Compressor(4000)
        self._model = model
        self.compressed: dict[str, Compressed] = {}  # node id → what prompts see of its output
        self._reuse = reuse or {}
        self._background = background or {}
        self.attempts: dict[str, int] = {}  # node id → LLM replies read for its arguments
        self.reused: set[str] = set()  # node ids answered from an earlier turn or call
        # this run's calls by call_key, running or done: one made twice is made once
        self._made: dict[str, asyncio.Future[JsonValue]] = {}
        self.rejected: dict[str, str] = {}  # node id → the tool's error fed back to the writer
        self.tools = InFlight()  # the wall time some tool was being called
        # node id → the plan's fixed arguments, the inputs and the choices, kept while a
        # revision may come
        self._written: dict[str, tuple[dict[str, JsonValue], dict[str, str], Choices]] = {}

    def tool(self, node: PlanNode) -> Tool:
        tool = self._tools.get(node.tool)
        if tool is None:
            raise ToolUnavailable(f"no tool named {node.tool} in the catalog", param=node.tool)
        return tool

    def host(self, node: PlanNode) -> str:
        tool = self._tools.get(node.tool)
        return tool_host(tool) if tool is not None else "local"

    async def prepare(
        self, node: PlanNode, arguments: dict[str, JsonValue], context: Mapping[str, JsonValue]
    ) -> None:
        """Write the arguments (outside the call's own time window, see the scheduler)."""
        if self._writer is not None:
            await self._write(self._writer, node, self.tool(node), arguments, context)

    async def revise(
        self,
        node: PlanNode,
        arguments: dict[str, JsonValue],
        context: Mapping[str, JsonValue],
        error: str,
    ) -> bool:
        """Rewrite the arguments the tool rejected with ``error``, once per node and only
        when the model wrote them (the plan's own values are not the writer's to change)."""
        writer, model, written = self._writer, self._model, self._written.pop(node.id, None)
        if writer is None or model is None or written is None:
            return False
        fixed, inputs, choices = written
        sent = dict(arguments)
        try:
            revised = await writer.revise(
                self.tool(node),
                node.task,
                fixed,
                inputs,
                model,
                sent,
                error,
                scalars(context),
                choices,
            )
        finally:
            self.rejected[node.id] = error
        self.attempts[node.id] = self.attempts.get(node.id, 0) + revised.attempts
        arguments.clear()
        arguments.update(revised.arguments)
        return True

    async def run(
        self, node: PlanNode, arguments: dict[str, JsonValue], context: Mapping[str, JsonValue]
    ) -> JsonValue:
        tool = self.tool(node)
        self._groups[node.id] = tool.group
        output = await self._call(node, tool, arguments)
        self.compressed[node.id] = await self._compress(tool, output)
        return output

    async def _compress(self, tool: Tool, output: JsonValue) -> Compressed:
        deadline = CALL_DEADLINE.get()
        if deadline is None:
            return await self._compressor.compress(tool, output, self._model)
        budget = deadline - asyncio.get_running_loop().time() - TRUNCATE_RESERVE
        try:
            async with asyncio.timeout(max(budget, 0.0)):
                return await self._compressor.compress(tool, output, self._model)
        except TimeoutError:
            return await self._compressor.compress(tool, output, choose_fields=False)

    async def _write(
        self,
        writer: ArgumentWriter,
        node: PlanNode,
        tool: Tool,
        arguments: dict[str, JsonValue],
        context: Mapping[str, JsonValue],
    ) -> None:
        inputs = dict(self._background)
        # Every ancestor ran (and was compressed) before this call could start; the
        # writer sees them all, the choices come from the direct dependencies alone.
        inputs.update({dep: self.compressed[dep].text for dep in context})
        fixed = dict(arguments)
        direct = {dep: context[dep] for dep in node.dependencies if dep in context}
        choices = self._offered(tool, fixed, direct)
        try:
            written = await writer.write(
                tool, node.task, fixed, inputs, self._model, scalars(context), choices
            )
        except NoValidArguments as exc:
            self.attempts[node.id] = exc.attempts
            raise
        self.attempts[node.id] = written.attempts
        if written.attempts:
            self._written[node.id] = (fixed, inputs, choices)
        arguments.clear()
        arguments.update(written.arguments)

    def _offered(
        self, tool: Tool, fixed: Mapping[str, JsonValue], context: Mapping[str, JsonValue]
    ) -> Choices:
        """The values of ``tool``'s chosen parameters that its dependencies of the same
        pack (group) gave."""
        paths = self._choices.get(tool.name)
        if not paths:
            return {}
        outputs = [out for dep, out in context.items() if self._groups.get(dep) == tool.group]
        return offered_choices(paths, outputs, fixed)

    async def _call(self, node: PlanNode, tool: Tool, arguments: dict[str, JsonValue]) -> JsonValue:
        key = call_key(tool.name, arguments)
        earlier = self._reuse.get(key, _ABSENT)
        if earlier is not _ABSENT:
            self.reused.add(node.id)
            return copy.deepcopy(earlier)
        same = self._made.get(key)
        if same is not None:  # made by another node of this run, perhaps still running
            self.reused.add(node.id)
            return copy.deepcopy(await asyncio.shield(same))
        if is_destructive(tool):  # a side effect asked twice is done twice
            return await self._invoke(node, tool, arguments)
        made = self._made[key] = asyncio.get_running_loop().create_future()
        try:
            output = await self._invoke(node, tool, arguments)
        except BaseException as exc:
            failed = exc if isinstance(exc, Exception) else ToolError(f"{tool.name}: cancelled")
            made.set_exception(failed)
            made.exception()  # read here: no node may be waiting for it
            raise
        made.set_result(output)
        return output

    async def _invoke(
        self, node: PlanNode, tool: Tool, arguments: dict[str, JsonValue]
    ) -> JsonValue:
        if not self._destructive and is_destructive(tool):
            raise DestructiveRefused(
                f"{tool.name} is marked destructive and runs only under an Idempotency-Key "
                "(so that a retried request cannot run it twice); it was not called",
                param=tool.name,
            )
        with bound_variables(self.variables), self.tools.interval():
            return await self._invoker.invoke(tool, arguments)


def is_destructive(tool: Tool) -> bool:
    """Whether the tool's source marks it destructive: MCP's ``destructiveHint: true``
    on a tool not marked ``readOnlyHint``. A tool that says nothing is not counted
    (MCP's own default would make every unannotated tool destructive)."""
    hints = tool.provenance.hints
    return hints.get("destructiveHint", False) and not hints.get("readOnlyHint", False)


_ABSENT: JsonValue = {"\0absent": True}


def call_key(tool: str, arguments: Mapping[str, JsonValue]) -> str:
    """One call's identity: the tool and its arguments, key order ignored."""
    return tool + "\0" + json_codec.dumps(dict(arguments), sort_keys=True).decode()
