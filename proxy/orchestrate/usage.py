"""``usage`` for an orchestrated answer: every upstream call of the request, added up."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from proxy.execute.llm import ChatModel, Message, ModelReply

KINDS = ("prompt_tokens", "completion_tokens", "total_tokens")


@dataclass(slots=True)
class Usage:
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    calls: int = 0

    def add(self, usage: object) -> None:
        """Add one OpenAI ``usage`` object (anything else is ignored)."""
        if not isinstance(usage, Mapping):
            return
        self.calls += 1
        for kind in KINDS:
            value = usage.get(kind)
            if isinstance(value, int) and value > 0:
                self.counts[kind] += value
        if not usage.get("total_tokens"):
            self.counts["total_tokens"] = (
                self.counts["prompt_tokens"] + self.counts["completion_tokens"]
            )

    def as_openai(self) -> dict[str, int]:
        return dict(self.counts)


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
