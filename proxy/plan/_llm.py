"""The planner's conversation with its model: prompts from files, counted calls."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import JsonValue

from proxy.llm import ChatModel, Message, ModelReply, parse_object

_PROMPTS = Path(__file__).parent / "prompts"


def prompt(name: str) -> str:
    return (_PROMPTS / f"{name}.md").read_text(encoding="utf-8")


class PlanningFailed(Exception):
    """The model's answers could not be made into a plan; the planner degrades."""


@dataclass
class CountedModel:
    """A :class:`ChatModel` that counts calls and tokens for the trace and the eval."""

    model: ChatModel
    calls: int = 0
    tokens: int = 0

    async def answer(
        self, messages: list[Message], max_tokens: int = 512, json: bool = True
    ) -> ModelReply:
        """The model's reply, counted; ``json`` (every planner prompt wants one JSON
        object) asks for JSON mode, which servers like llama.cpp enforce with a grammar."""
        self.calls += 1
        reply = await self.model.reply(messages, max_tokens=max_tokens, json=json)
        self.tokens += reply.usage.get("total_tokens", 0)
        return reply

    async def ask_object(
        self, messages: list[Message], max_tokens: int = 512
    ) -> dict[str, JsonValue] | None:
        return parse_object((await self.answer(messages, max_tokens)).text)
