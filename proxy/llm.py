"""The proxy's one seam to an LLM: messages in, the assistant's text out.

:class:`ChatModel` is what the planner, the executor (field selection, argument
generation, compression) and orchestrate ask; :class:`UpstreamModel` answers through
the proxy's own upstream clients (relay or litellm, whichever the route uses), so
these calls are routed, timed, counted and keyed exactly like a client's.
:func:`parse_object` reads a JSON object out of a reply and :func:`quote_result`
quotes a tool's output as data in a prompt.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import JsonValue

from proxy import json_codec
from proxy.context import RequestContext
from proxy.errors import UpstreamError
from proxy.upstream import Target, Upstream

Message = dict[str, str]
_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


@dataclass(frozen=True, slots=True)
class ModelReply:
    text: str
    usage: dict[str, int] = field(default_factory=dict)
    truncated: bool = False  # cut at max_tokens (finish_reason "length")


class ChatModel(Protocol):
    async def reply(
        self, messages: Sequence[Message], *, max_tokens: int = 512, json: bool = False
    ) -> ModelReply:
        """The assistant's answer to ``messages``; :class:`UpstreamError` when none came.

        ``json`` asks for a JSON object (OpenAI's ``response_format``), which servers
        such as llama.cpp enforce with a grammar.
        """
        ...


class UpstreamModel:
    """A :class:`ChatModel` over one routed upstream model, at temperature 0."""

    def __init__(self, upstream: Upstream, target: Target, context: RequestContext) -> None:
        self._upstream = upstream
        self._target = target
        self._context = context

    async def reply(
        self, messages: Sequence[Message], *, max_tokens: int = 512, json: bool = False
    ) -> ModelReply:
        body: dict[str, Any] = {
            "model": self._target.model,
            "messages": list(messages),
            "temperature": 0,
            "max_tokens": max_tokens,
        }
        if json:
            body["response_format"] = {"type": "json_object"}
        answer = await self._upstream.complete(self._target, body, None, self._context)
        try:
            payload = json_codec.loads(answer.content)
            choice = payload["choices"][0]
            text = choice["message"]["content"] or ""
        except (json_codec.DecodeError, KeyError, IndexError, TypeError):
            raise UpstreamError("the upstream's answer was not a chat completion") from None
        usage = payload.get("usage") or {}
        counts = {k: v for k, v in usage.items() if isinstance(v, int)}
        return ModelReply(str(text), counts, truncated=choice.get("finish_reason") == "length")


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
