"""The executor's one question to an LLM: messages in, the assistant's text out.

:class:`UpstreamModel` asks through the proxy's own upstream clients (relay or
litellm, whichever the route uses), so the executor's calls are routed, timed,
counted and keyed exactly like a client's. Field selection, argument generation and
the planner all ask through it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from proxy import json_codec
from proxy.context import RequestContext
from proxy.errors import UpstreamError
from proxy.upstream import Target, Upstream

Message = dict[str, str]


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
