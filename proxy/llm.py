"""The proxy's one seam to an LLM: messages in, the assistant's text out.

:class:`ChatModel` is what the planner, the executor (field selection, argument
generation, compression) and orchestrate ask; :class:`UpstreamModel` answers through
the proxy's own upstream clients (relay or litellm, whichever the route uses), so
these calls are routed, timed, counted and keyed exactly like a client's.
:class:`MeteredModel` counts the calls and tokens (:class:`Usage`, the one meter);
:func:`parse_object` reads a JSON object out of a reply and :func:`quote_result`
quotes a tool's output as data in a prompt.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import JsonValue

from proxy.context import RequestContext
from proxy.errors import ModelCallsSpent, UpstreamError
from proxy.protocol.chat import read_completion
from proxy.upstream import Target, Upstream

Message = dict[str, str]  # one chat message: role and content
_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


@dataclass(frozen=True, slots=True)
class ModelReply:
    """The assistant's text, the call's OpenAI ``usage`` counts, and whether it was cut."""

    text: str
    usage: dict[str, int] = field(default_factory=dict)
    truncated: bool = False  # cut at max_tokens (finish_reason "length")


class ChatModel(Protocol):
    async def reply(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int = 512,
        json: bool = False,
        purpose: str = "",
        about: str = "",
    ) -> ModelReply:
        """The assistant's answer to ``messages``; :class:`UpstreamError` when none came.

        ``json`` asks for a JSON object (OpenAI's ``response_format``), which servers
        such as llama.cpp enforce with a grammar. ``purpose`` (the stage asking:
        ``decompose``, ``pick``, ``arguments``…) and ``about`` (the sub-task or tool it
        concerns) label the call in the meter's log, so a trace can show what each
        upstream call was for and what it cost.
        """
        ...


class UpstreamModel:
    """A :class:`ChatModel` over one routed upstream model, at temperature 0."""

    def __init__(self, upstream: Upstream, target: Target, context: RequestContext) -> None:
        self._upstream = upstream
        self._target = target
        self._context = context

    async def reply(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int = 512,
        json: bool = False,
        purpose: str = "",
        about: str = "",
    ) -> ModelReply:
        body: dict[str, Any] = {
            "model": self._target.model,
            "messages": list(messages),
            "temperature": 0,
            "max_tokens": max_tokens,
        }
        if json:
            body["response_format"] = {"type": "json_object"}
        reply = await self._upstream.complete(self._target, body, None, self._context)
        answer = read_completion(reply.content)
        if not answer.choices or "message" not in answer.choices[0].model_fields_set:
            raise UpstreamError("the upstream's answer was not a chat completion")
        choice = answer.choices[0]
        usage = answer.usage.model_dump() if answer.usage else {}
        counts = {k: v for k, v in usage.items() if isinstance(v, int)}
        text = choice.message.content or ""
        return ModelReply(text, counts, truncated=choice.finish_reason == "length")


@dataclass(frozen=True, slots=True)
class UpstreamCall:
    """One upstream reply in a meter's log: what it was for and its token counts."""

    purpose: (
        str  # the stage that asked: triage, decompose, pick, reflect, fields, arguments, answer
    )
    about: str  # the sub-task or tool it concerned; "" for the whole request
    prompt_tokens: int
    completion_tokens: int
    seconds: float = field(default=0.0, compare=False)  # the reply's wall time, when timed


@dataclass(slots=True)
class Usage:
    """What some LLM calls cost, added up: the one usage meter.

    Orchestrate keeps one per request (its ``usage`` and trace); the planner keeps
    its own share (``plan.llm_calls``, ``plan.tokens``) through :func:`metered`.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0  # the upstreams' own totals, summed: the planner's figure
    calls: int = 0  # usage objects added: one per reply that came
    asked: int = 0  # questions asked through a MeteredModel, failed ones included
    log: list[UpstreamCall] = field(default_factory=list)  # one per usage object added

    def add(self, usage: object, purpose: str = "", about: str = "", seconds: float = 0.0) -> None:
        """Add one OpenAI ``usage`` object (anything else is ignored), and log it under
        ``purpose`` and ``about`` with the reply's wall time ``seconds``."""
        if not isinstance(usage, Mapping):
            return
        self.calls += 1
        prompt, completion = (
            _count(usage.get("prompt_tokens")),
            _count(usage.get("completion_tokens")),
        )
        self.prompt_tokens += prompt
        self.completion_tokens += completion
        self.total_tokens += _count(usage.get("total_tokens"))
        self.log.append(UpstreamCall(purpose, about, prompt, completion, seconds))

    def as_openai(self) -> dict[str, int]:
        """OpenAI's three counts; the total is the two others' sum, as OpenAI's is."""
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
        }


def _count(value: object) -> int:
    return value if isinstance(value, int) and value > 0 else 0


@dataclass(slots=True)
class CallBudget:
    """How many questions one request may still ask the model, and until when (the
    event loop's clock; None: any time), shared by every part."""

    limit: int
    until: float | None = None
    spent: int = 0

    def spend(self) -> None:
        """Count one question; :class:`ModelCallsSpent` when none is left."""
        if self.spent >= self.limit:
            raise ModelCallsSpent(f"the request's {self.limit} model calls are spent")
        if self.until is not None and asyncio.get_running_loop().time() >= self.until:
            raise ModelCallsSpent("the request's time for model calls before its answer is spent")
        self.spent += 1


class MeteredModel:
    """A :class:`ChatModel` that counts every question and adds every reply's usage
    to its meter (``usage``) and to the meters it shares (see :func:`metered`); with a
    ``budget``, a question past it raises :class:`ModelCallsSpent` unasked."""

    def __init__(
        self,
        model: ChatModel,
        usage: Usage | None = None,
        *,
        shared: Sequence[Usage] = (),
        budget: CallBudget | None = None,
    ) -> None:
        self.model = model
        self.usage = Usage() if usage is None else usage
        self.meters = (self.usage, *shared)
        self.budget = budget

    async def reply(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int = 512,
        json: bool = False,
        purpose: str = "",
        about: str = "",
    ) -> ModelReply:
        if self.budget is not None:
            self.budget.spend()
        for meter in self.meters:
            meter.asked += 1
        started = time.perf_counter()
        answer = await self.model.reply(
            messages, max_tokens=max_tokens, json=json, purpose=purpose, about=about
        )
        seconds = time.perf_counter() - started
        for meter in self.meters:
            meter.add(answer.usage, purpose, about, seconds)
        return answer

    async def ask_object(
        self, messages: Sequence[Message], max_tokens: int = 512, purpose: str = ""
    ) -> dict[str, JsonValue] | None:
        """The JSON object the model answers (JSON mode); ``None`` when there is none."""
        reply = await self.reply(messages, max_tokens=max_tokens, json=True, purpose=purpose)
        return parse_object(reply.text)


def metered(model: ChatModel) -> MeteredModel:
    """``model`` with a fresh meter of its own: a part's share of the calls.

    A model that is metered already is unwrapped, and its meters keep counting too,
    so the planner's share also lands in the request's total, with no meter stacked
    inside another; its budget still bounds it.
    """
    if isinstance(model, MeteredModel):
        return MeteredModel(model.model, shared=model.meters, budget=model.budget)
    return MeteredModel(model)


def parse_object(text: str) -> dict[str, JsonValue] | None:
    """The JSON object in a reply, tolerating prose or code fences around it."""
    for candidate in (text.strip(), *(m.group(0) for m in _JSON_OBJECT.finditer(text))):
        try:
            value = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        return value if isinstance(value, dict) else None
    return None


def quote_result(node: str, text: str) -> str:
    """A tool's output between ``<result>`` tags that its own text cannot close."""
    safe = text.replace("</result", "<\\/result").replace("<result", "<\\result")
    return f'<result id="{node}">\n{safe}\n</result>'
