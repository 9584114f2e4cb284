"""One orchestrated request in flight: what it asked, what it did, how it ended.

:class:`Turn` is typed state the pipeline fills in as it goes (the gate's decision,
the plan, the tool DAG, the executed calls, the outcome); the stored trace is
derived from it when it is saved (``traces.turn_trace``), and nothing reads the
trace back to decide what to do next.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import JsonValue

from proxy import metrics
from proxy.context import RequestContext
from proxy.errors import ToolgraphError
from proxy.execute.plan import ToolPlan
from proxy.execute.scheduler import CallRecord
from proxy.execute.service import ExecutedPlan
from proxy.llm import Usage
from proxy.plan.model import Plan
from proxy.protocol.chat import ChatCompletionRequest
from proxy.tools.variables import Variables
from proxy.upstream import Target, Upstream
from retriever.conversation import message_text

if TYPE_CHECKING:
    from retriever.gate.model import Decision

TRACE_HEADER = "x-toolgraph-trace-id"
#: Messages of the conversation the planner reads, newest kept, and their characters.
PLAN_TURNS = 12
PLAN_CHARS = 6000


@dataclass(frozen=True, slots=True)
class AnsweredDirectly:
    """The upstream answered with no tool run for this request (the gate said no
    tool serves it, or the plan had no call)."""

    text: str


@dataclass(frozen=True, slots=True)
class AnsweredFromTools:
    """The upstream answered from this request's tool results."""

    text: str
    executed: ExecutedPlan


@dataclass(frozen=True, slots=True)
class AskedUser:
    """A required value only the user can give: the question is the whole answer."""

    question: str


@dataclass(frozen=True, slots=True)
class Failed:
    """The request ended in ``error`` (the client gets it as an error body or event)."""

    error: ToolgraphError


Outcome = AnsweredDirectly | AnsweredFromTools | AskedUser | Failed


@dataclass(slots=True)
class Turn:
    """One orchestrated request in flight, and what its trace is derived from."""

    request: ChatCompletionRequest
    body: dict[str, Any]
    context: RequestContext
    target: Target
    upstream: Upstream
    client: str  # the client's tenant (proxy.tenancy): scopes its records and memory
    fairness: str  # whose per-client slots its tool calls take (proxy.tenancy.callers)
    trace_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    completion_id: str = field(default_factory=lambda: f"chatcmpl-tg{uuid.uuid4().hex[:24]}")
    created: int = field(default_factory=lambda: int(time.time()))
    usage: Usage = field(default_factory=Usage)
    timings: dict[str, float] = field(default_factory=dict)
    tools_ran: bool = False  # a tool call started: a retry must not run it again
    keyed: bool = False  # the request holds an Idempotency-Key: destructive tools may run
    gate: Decision | None = None  # None: the gate is off
    plan: Plan | None = None
    tool_plan: ToolPlan | None = None
    executed: ExecutedPlan | None = None
    #: The running plan's calls as the scheduler starts and ends them: what the trace of
    #: a request cancelled mid-run (a client that left) shows, as ``executed`` never comes.
    running: dict[str, CallRecord] = field(default_factory=dict)
    variables: Variables = field(default_factory=Variables)  # entity sets, for every plan run
    outcome: Outcome | None = None  # None: still running, or cancelled
    trace_saved: bool = False

    @property
    def messages(self) -> list[JsonValue]:
        messages: list[JsonValue] = self.body["messages"]
        return messages

    @property
    def headers(self) -> dict[str, str]:
        return {TRACE_HEADER: self.trace_id}

    def answered(self) -> bool:
        """Whether the client got a whole answer (or a question), not an error."""
        return isinstance(self.outcome, AnsweredDirectly | AnsweredFromTools | AskedUser)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time a stage into the trace (summed when it runs twice) and the histogram."""
        started = time.perf_counter()
        try:
            yield
        finally:
            took = time.perf_counter() - started
            self.timings[name] = round(self.timings.get(name, 0.0) + took, 6)
            metrics.STAGE_LATENCY.labels(name).observe(took)


def conversation_text(messages: list[JsonValue]) -> str:
    """The conversation as the planner reads it: recent turns, ``role: text`` lines."""
    turns = [
        (str(message.get("role")), text)
        for message in dicts(messages)[-PLAN_TURNS:]
        if message.get("role") in ("user", "assistant") and (text := message_text(message))
    ]
    if len(turns) == 1:  # a single request needs no speaker
        return turns[0][1][-PLAN_CHARS:]
    return "\n".join(f"{role}: {text}" for role, text in turns)[-PLAN_CHARS:]


def dicts(messages: list[JsonValue]) -> list[Mapping[str, JsonValue]]:
    return [m for m in messages if isinstance(m, dict)]
