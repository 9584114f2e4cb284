"""The answer's side of orchestrate mode: the prompt, and the shapes the client sees.

The answering model gets toolgraph's system message (instructions and the quoted
results) ahead of the client's own messages. What goes back has OpenAI's shapes
exactly: ``chat.completion`` bodies and ``chat.completion.chunk`` events under one
id, progress as ``delta.reasoning_content`` (the field reasoning models stream
their thinking in), ``usage`` the sum of every upstream call of the request.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import JsonValue

from proxy import sse
from proxy.execute.service import ExecutedPlan
from proxy.llm import quote_result
from proxy.orchestrate.conversation import EarlierCall
from proxy.orchestrate.values import Value, returned_values
from proxy.protocol.base import dump_json, unset
from proxy.protocol.chat import (
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionMessage,
    Choice,
    ChoiceDelta,
    ChunkChoice,
    CompletionUsage,
)

PROMPT = (Path(__file__).parent / "prompts" / "answer.md").read_text(encoding="utf-8")
# Fields of the client's request that concern tools the client runs: not the answer's.
_TOOL_FIELDS = ("tools", "tool_choice", "parallel_tool_calls", "functions", "function_call")


def answer_messages(
    messages: Sequence[JsonValue],
    executed: ExecutedPlan | None,
    earlier: Sequence[EarlierCall],
) -> list[JsonValue]:
    """The answering call's messages: toolgraph's system message (the instructions, the
    quoted results) ahead of the client's. With no tool run and no earlier result there
    is nothing to quote: the client's messages go as they came, so a request no tool
    serves is answered as passthrough answers it, without the prompt's tokens."""
    if executed is None and not earlier:
        return list(messages)
    parts = [PROMPT]
    if earlier:
        quoted = "\n".join(
            quote_result(f"earlier-{i}", f"{call.tool}: {call.text}")
            for i, call in enumerate(earlier, 1)
        )
        parts.append(f"Results from earlier in this conversation:\n{quoted}")
    if executed is not None and executed.run.records:
        inputs = executed.answer_inputs()
        records = executed.run.records
        quoted = "\n".join(
            quote_result(node, f"{records[node].node.tool} ({records[node].node.task}): {text}")
            for node, text in inputs.items()
        )
        if quoted:
            parts.append(f"Results of this request's tool calls:\n{quoted}")
        if values := returned_values(executed.run):
            parts.append(values_part(values))
        if failed := executed.run.unfinished():
            parts.append("Could not be done:\n" + "\n".join(f"- {line}" for line in failed))
    return [{"role": "system", "content": "\n\n".join(parts)}, *messages]


def values_part(values: list[Value]) -> str:
    """The numbers the tools returned, for the answer to state."""
    lines = "\n".join(f"- {value.line()}" for value in values)
    return f"Values the tools returned (state the ones the question asks for):\n{lines}"


def restated(messages: list[JsonValue], values: list[Value]) -> list[JsonValue]:
    """``messages`` again, for an answer that stated none of ``values``."""
    first = messages[0]
    if not isinstance(first, dict):  # answer_messages' own system message comes first
        return messages
    note = (
        "An earlier answer to this request stated none of the values the tools returned. "
        "Answer again and state the value the question asks for, as a number with its unit."
    )
    return [{**first, "content": f"{first['content']}\n\n{note}"}, *messages[1:]]


def answer_body(body: Mapping[str, Any], model: str, messages: list[JsonValue]) -> dict[str, Any]:
    """The client's request as the answering call: its options kept, tools dropped."""
    outgoing = {k: v for k, v in body.items() if k not in _TOOL_FIELDS and k != "toolgraph"}
    outgoing["model"] = model
    outgoing["messages"] = messages
    if outgoing.get("stream"):
        outgoing["stream_options"] = {"include_usage": True}
    return outgoing


def completion(
    completion_id: str, created: int, model: str, content: str, usage: Mapping[str, int]
) -> ChatCompletion:
    """A whole ``chat.completion`` toolgraph writes itself (a question to the user)."""
    message = ChatCompletionMessage(role="assistant", content=content, refusal=None)
    return ChatCompletion(
        id=completion_id,
        object="chat.completion",
        created=created,
        model=model,
        choices=[Choice(index=0, message=message, logprobs=None, finish_reason="stop")],
        usage=CompletionUsage.model_validate(usage),
    )


def with_usage(answer: ChatCompletion, usage: Mapping[str, int]) -> ChatCompletion:
    """The upstream's answer with the request's ``usage`` (every call of it) instead."""
    answer.usage = CompletionUsage.model_validate(usage)
    return answer


class ChunkWriter:
    """Events of one streamed answer: one id, one model name, usage when asked for."""

    def __init__(self, completion_id: str, created: int, model: str, include_usage: bool) -> None:
        self.id = completion_id
        self.created = created
        self.model = model
        self.include_usage = include_usage
        self._role_sent = False

    def delta(self, delta: ChoiceDelta, finish_reason: str | None = None) -> bytes:
        if not self._role_sent:
            delta.role = "assistant"
            self._role_sent = True
        choice = ChunkChoice(index=0, delta=delta, logprobs=None, finish_reason=finish_reason)
        return self._event(self._chunk([choice]))

    def progress(self, text: str) -> bytes:
        return self.delta(ChoiceDelta(content=None, reasoning_content=text))

    def end(self, usage: Mapping[str, int]) -> Iterator[bytes]:
        if self.include_usage:
            chunk = self._chunk([])
            chunk.usage = CompletionUsage.model_validate(usage)
            yield event(chunk)
        yield sse.DONE

    def upstream_chunk(self, chunk: ChatCompletionChunk) -> bytes:
        """An answer chunk from the upstream, under this stream's id; usage goes last."""
        chunk.id = self.id
        if self._role_sent:
            for choice in chunk.choices:
                if choice.delta.role == "assistant":
                    unset(choice.delta, "role")
        else:
            self._role_sent = True
        return self._event(chunk)

    def _chunk(self, choices: list[ChunkChoice]) -> ChatCompletionChunk:
        return ChatCompletionChunk(
            id=self.id,
            object="chat.completion.chunk",
            created=self.created,
            model=self.model,
            choices=choices,
        )

    def _event(self, chunk: ChatCompletionChunk) -> bytes:
        # With usage asked for, every chunk but the last says ``"usage": null``.
        if self.include_usage:
            chunk.usage = None
        else:
            unset(chunk, "usage")
        return event(chunk)


def event(chunk: ChatCompletionChunk) -> bytes:
    return sse.data_event(dump_json(chunk))
