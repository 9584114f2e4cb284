"""The ways a request is answered, each through the same toolgraph proxy.

* ``orchestrate``: toolgraph plans over its catalog, runs the tools, and the model
  answers from their results (one request, ``toolgraph.mode = "orchestrate"``);
* ``all_tools``: passthrough with every catalog tool in ``tools``; this client runs
  the calls the model makes, with the sandbox orchestrate mode runs built-ins in
  and the same in-process pack tools (one request's entity variables per task),
  and sends the results back, for at most :data:`MAX_ROUNDS` rounds;
* ``select``: the same client loop on Chat Completions in select mode, every catalog
  tool marked ``defer_loading: true``: toolgraph forwards the few the conversation
  needs, keeping those loaded on earlier rounds (with every tool deferred, select mode
  chooses among all of them, as it does with none marked: this is select mode as it
  ships and the Chat Completions form of deferred loading at once);
* ``tool_search``: the same client loop on the Responses API, as a client written for
  OpenAI's tool search sends it: ``{"type": "tool_search"}`` and every catalog tool a
  deferred function; toolgraph runs the search, and each round after the first sends
  the function calls' outputs with ``previous_response_id``;
* ``no_tools``: passthrough, the bare question.

Every arm returns an :class:`Outcome`: the answer's text, the tokens the upstream
counted over every call the request made, the tools called, and the error when the
request failed (a context overflow is an error like any other, recorded, not raised).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx
import openai
from openai.types.chat import ChatCompletionMessageParam
from openai.types.responses import (
    Response,
    ResponseFunctionToolCall,
    ResponseToolSearchOutputItem,
)
from pydantic import JsonValue

from eval.e2e.tasks import Task, system_for
from graph_store.models import Tool
from proxy.errors import ToolError
from proxy.tools.builtin import BUILTIN_SCHEME, PythonTools
from proxy.tools.variables import Variables, bound_variables

Arm = Literal["orchestrate", "all_tools", "select", "tool_search", "no_tools"]
ARMS: tuple[Arm, ...] = ("orchestrate", "all_tools", "select", "tool_search", "no_tools")
DEFAULT_ARMS: tuple[Arm, ...] = ("orchestrate", "all_tools", "no_tools")
MAX_ROUNDS = 4  # tool rounds of a client that runs the tools before it stops asking
RESULT_CHARS = 2000  # of a tool's result sent back to the model
#: Tokens of one reply, in every arm (orchestrate passes it to its answering call):
#: unbounded, the model wrote 1,000-token derivations at 5 tokens/s on a busy machine.
MAX_TOKENS = 600
TRACE_HEADER = "x-toolgraph-trace-id"
LOOPBACK = "http://127.0.0.1:"


@dataclass(slots=True)
class Outcome:
    answer: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tool_calls: list[str] = field(default_factory=list)
    rounds: int = 0
    error: str = ""
    trace: dict[str, Any] | None = None
    loaded: list[str] = field(default_factory=list)  # what tool_search loaded, in order

    def add_usage(self, usage: object) -> None:
        """Add a Chat Completions ``usage``, or a Responses one (input and output tokens)."""
        self.prompt_tokens += _tokens(usage, "prompt_tokens", "input_tokens")
        self.completion_tokens += _tokens(usage, "completion_tokens", "output_tokens")


def _tokens(usage: object, *names: str) -> int:
    return sum(int(getattr(usage, name, 0) or 0) for name in names)


def messages_for(task: Task) -> list[ChatCompletionMessageParam]:
    return [
        {"role": "system", "content": system_for(task)},
        {"role": "user", "content": task.question},
    ]


class ArmClient:
    """Sends one task through one arm of a proxy at ``proxy_url``."""

    def __init__(
        self,
        proxy_url: str,
        key: str,
        model: str,
        timeout: float,
        catalog: list[Tool],
        runner: PythonTools,
    ) -> None:
        self.model = model
        self.client = openai.AsyncOpenAI(
            base_url=f"{proxy_url}/v1", api_key=key, max_retries=0, timeout=timeout
        )
        self.http = httpx.AsyncClient(
            base_url=proxy_url, headers={"authorization": f"Bearer {key}"}, timeout=30
        )
        self.catalog = {tool.name: tool for tool in catalog}
        self.tools: list[Any] = [tool.openai_function() for tool in catalog]
        self.deferred = [{**tool, "defer_loading": True} for tool in self.tools]
        # the Responses API's flat function tools, deferred, behind OpenAI's tool search
        self.searched: list[Any] = [{"type": "tool_search"}] + [
            {"type": "function", **tool["function"], "defer_loading": True} for tool in self.tools
        ]
        self.runner = runner

    async def aclose(self) -> None:
        await self.client.close()
        await self.http.aclose()

    async def run(self, arm: Arm, task: Task) -> tuple[Outcome, float]:
        """The arm's outcome on ``task`` and the request's wall time in seconds."""
        outcome = Outcome()
        started = time.perf_counter()
        try:
            if arm == "orchestrate":
                await self._orchestrate(task, outcome)
            elif arm == "all_tools":
                await self._all_tools(task, outcome)
            elif arm == "select":
                await self._select(task, outcome)
            elif arm == "tool_search":
                await self._tool_search(task, outcome)
            else:
                await self._no_tools(task, outcome)
        except openai.APIStatusError as exc:
            outcome.error = f"{exc.status_code} {_error_code(exc.body)}: {exc.message}"[:300]
        except (openai.APIError, TimeoutError) as exc:
            outcome.error = f"{type(exc).__name__}: {exc}"[:300]
        return outcome, time.perf_counter() - started

    async def _orchestrate(self, task: Task, outcome: Outcome) -> None:
        raw = await self.client.chat.completions.with_raw_response.create(
            model=self.model,
            messages=messages_for(task),
            temperature=0,
            max_tokens=MAX_TOKENS,
            extra_body={"toolgraph": {"mode": "orchestrate"}},
        )
        completion = raw.parse()
        outcome.answer = completion.choices[0].message.content or ""
        outcome.add_usage(completion.usage)
        outcome.rounds = 1
        trace_id = raw.headers.get(TRACE_HEADER)
        if trace_id:
            outcome.trace = await self._trace(trace_id)
            calls = (outcome.trace or {}).get("calls") or []
            outcome.tool_calls = [str(call.get("tool")) for call in calls if isinstance(call, dict)]

    async def _all_tools(self, task: Task, outcome: Outcome) -> None:
        with bound_variables(Variables()):  # the graph's entity sets, for this task only
            await self._tool_rounds(task, outcome, self.tools, {})

    async def _select(self, task: Task, outcome: Outcome) -> None:
        with bound_variables(Variables()):
            await self._tool_rounds(task, outcome, self.deferred, {"mode": "select"})

    async def _tool_rounds(
        self, task: Task, outcome: Outcome, tools: list[Any], toolgraph: dict[str, str]
    ) -> None:
        messages: list[Any] = list(messages_for(task))
        for _ in range(MAX_ROUNDS + 1):
            completion = await self.client.chat.completions.create(
                model=self.model,
                messages=messages,
                tools=tools,
                temperature=0,
                max_tokens=MAX_TOKENS,
                extra_body={"toolgraph": toolgraph} if toolgraph else None,
            )
            outcome.rounds += 1
            outcome.add_usage(completion.usage)
            message = completion.choices[0].message
            outcome.answer = message.content or ""
            if not message.tool_calls or outcome.rounds > MAX_ROUNDS:
                return
            messages.append(message.model_dump(exclude_none=True))
            for call in message.tool_calls:
                name = call.function.name  # type: ignore[union-attr]
                outcome.tool_calls.append(name)
                result = await self._call(name, call.function.arguments)  # type: ignore[union-attr]
                messages.append({"role": "tool", "tool_call_id": call.id, "content": result})

    async def _tool_search(self, task: Task, outcome: Outcome) -> None:
        with bound_variables(Variables()):
            await self._search_rounds(task, outcome)

    async def _search_rounds(self, task: Task, outcome: Outcome) -> None:
        """The client loop of :meth:`_tool_rounds` on the Responses API: each round after
        the first continues the last response with its calls' outputs."""
        given: Any = task.question
        previous: str | openai.Omit = openai.omit
        for _ in range(MAX_ROUNDS + 1):
            response = await self.client.responses.create(
                model=self.model,
                instructions=system_for(task),
                input=given,
                tools=self.searched,
                previous_response_id=previous,
                temperature=0,
                max_output_tokens=MAX_TOKENS,
            )
            outcome.rounds += 1
            outcome.add_usage(response.usage)
            outcome.answer = response.output_text
            outcome.loaded.extend(_newly_loaded(response, outcome.loaded))
            calls = [item for item in response.output if isinstance(item, ResponseFunctionToolCall)]
            if not calls or outcome.rounds > MAX_ROUNDS:
                return
            given = []
            for call in calls:
                outcome.tool_calls.append(call.name)
                result = await self._call(call.name, call.arguments)
                given.append(
                    {"type": "function_call_output", "call_id": call.call_id, "output": result}
                )
            previous = response.id

    async def _no_tools(self, task: Task, outcome: Outcome) -> None:
        completion = await self.client.chat.completions.create(
            model=self.model, messages=messages_for(task), temperature=0, max_tokens=MAX_TOKENS
        )
        outcome.rounds = 1
        outcome.answer = completion.choices[0].message.content or ""
        outcome.add_usage(completion.usage)

    async def _call(self, name: str, arguments: str) -> str:
        """One tool call of the all-tools arm, as text for the model (errors too)."""
        tool = self.catalog.get(name)
        if tool is None:
            return json.dumps({"error": f"no tool named {name}"})
        url = tool.endpoint.url if tool.endpoint else ""
        local = url.startswith(LOOPBACK)  # BFCL's task tools (eval.e2e.bfcl)
        if not url.startswith(BUILTIN_SCHEME) and not local:
            return json.dumps({"error": f"{name} cannot be reached from this machine (offline)"})
        try:
            parsed = json.loads(arguments or "{}")
            if not isinstance(parsed, dict):
                raise ValueError("the arguments are not a JSON object")
            if local:  # the same endpoint the proxy calls; its error body is the answer
                return (await self.http.post(url, json=parsed)).text[:RESULT_CHARS]
            result: JsonValue = await self.runner.invoke(tool, parsed)
        except ValueError as exc:
            return json.dumps({"error": f"the arguments are not valid JSON: {exc}"})
        except ToolError as exc:
            return json.dumps({"error": exc.message})
        return json.dumps(result)[:RESULT_CHARS]

    async def _trace(self, trace_id: str) -> dict[str, Any] | None:
        for pause in (0.0, 1.0, 3.0):
            await asyncio.sleep(pause)
            response = await self.http.get(f"/v1/toolgraph/traces/{trace_id}")
            if response.status_code == 200:
                trace: dict[str, Any] = response.json()
                return trace
        return None


def _newly_loaded(response: Response, loaded: list[str]) -> list[str]:
    """The tools ``response``'s search loaded that are not in ``loaded`` yet."""
    found = [
        name
        for item in response.output
        if isinstance(item, ResponseToolSearchOutputItem)
        for tool in item.tools
        if (name := getattr(tool, "name", None)) is not None
    ]
    return [name for name in dict.fromkeys(found) if name not in loaded]


def _error_code(body: object) -> str:
    error = body.get("error", body) if isinstance(body, Mapping) else None
    return str(error.get("code")) if isinstance(error, Mapping) else ""
