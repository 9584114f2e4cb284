"""``usage`` for an orchestrated answer: every upstream call of the request, added up."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from proxy.llm import ChatModel, Message, ModelReply


@dataclass(slots=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0

    def add(self, usage: object) -> None:
        """Add one OpenAI ``usage`` object (anything else is ignored)."""
        if not isinstance(usage, Mapping):
            return
        self.calls += 1
        self.prompt_tokens += _count(usage.get("prompt_tokens"))
        self.completion_tokens += _count(usage.get("completion_tokens"))

    def as_openai(self) -> dict[str, int]:
        """OpenAI's three counts; the total is the two others' sum, as OpenAI's is."""
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
        }


def _count(value: object) -> int:
    return value if isinstance(value, int) and value > 0 else 0


class MeteredModel:
    """A :class:`ChatModel` that adds every reply's usage to the request's total."""

    def __init__(self, model: ChatModel, usage: Usage) -> None:
        self._model = model
        self.usage = usage

    async def reply(
        self, messages: Sequence[Message], *, max_tokens: int = 512, json: bool = False
    ) -> ModelReply:
        answer = await self._model.reply(messages, max_tokens=max_tokens, json=json)
        self.usage.add(answer.usage)
        return answer
