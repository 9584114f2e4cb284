"""The fake upstream's answers: a :class:`~testing.fake_script.Script` as OpenAI's chat
completion (whole or as a stream of chunks) or legacy text completion."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import orjson

from testing.fake_cache import Seen
from testing.fake_script import FakeToolCall, Script


class Answer:
    """One scripted answer, as a whole completion or as OpenAI's stream of chunks."""

    def __init__(
        self,
        script: Script,
        request: dict[str, Any],
        number: int,
        text_api: bool = False,
        seen: Seen | None = None,
    ) -> None:
        """``seen``: what the prompt cache found for the prompt (reported in ``usage``)."""
        self.script = script
        self.seen = seen
        self.request = request
        self.text_api = text_api  # /v1/completions: a prompt in, choices of text out
        self.id = f"{'cmpl' if text_api else 'chatcmpl'}-fake{number:06d}"
        self.created = int(time.time())
        self.model = str(request.get("model", "fake-model"))
        echoed = echo_prompt(request) if text_api else echo(request)
        self.text = script.text if script.text is not None else echoed
        self.calls = [
            FakeToolCall(c.name, c.arguments, c.id or f"call_{number}_{i}")
            for i, c in enumerate(script.tool_calls)
        ]

    def usage(self) -> dict[str, Any]:
        prompt, completion = self.script.usage or self._counted()
        seen = self.seen
        if seen is not None and seen.tokens is not None and self.script.usage is None:
            prompt = seen.tokens
        usage: dict[str, Any] = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }
        if seen is not None:
            cached = seen.cached if seen.cached is not None else int(prompt * seen.share)
            usage["prompt_tokens_details"] = {"cached_tokens": min(cached, prompt)}
        return usage

    def _counted(self) -> tuple[int, int]:
        """Words as tokens: the prompt's messages (or text prompt), the answer's text."""
        prompt = sum(
            len(str(m.get("content") or "").split()) for m in self.request.get("messages", [])
        ) + len(str(self.request.get("prompt") or "").split())
        completion = len(self.text.split()) + sum(len(c.arguments) // 4 for c in self.calls)
        return prompt, completion

    def finish_reason(self) -> str:
        if self.script.finish_reason is not None:
            return self.script.finish_reason
        return "tool_calls" if self.calls else "stop"

    def completion(self) -> dict[str, Any]:
        if self.text_api:
            return {**self._text_chunk(self.text, self.finish_reason()), "usage": self.usage()}
        message: dict[str, Any] = {
            "role": "assistant",
            "content": None if self.calls else self.text,
            "refusal": None,
        }
        if self.calls:
            message["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in self.calls
            ]
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": "fp_fake",
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": self.finish_reason(),
                }
            ],
            "usage": self.usage(),
        }

    def events(self) -> Iterator[bytes]:
        include_usage = bool((self.request.get("stream_options") or {}).get("include_usage"))
        if self.text_api:
            yield from self._text_events(include_usage)
            return
        for delta, finish in self._deltas():
            chunk: dict[str, Any] = {
                "id": self.id,
                "object": "chat.completion.chunk",
                "created": self.created,
                "model": self.model,
                "system_fingerprint": "fp_fake",
                "choices": [
                    {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
                ],
            }
            if include_usage:
                chunk["usage"] = None
            yield orjson.dumps(chunk)
        if include_usage:
            yield orjson.dumps(
                {
                    "id": self.id,
                    "object": "chat.completion.chunk",
                    "created": self.created,
                    "model": self.model,
                    "system_fingerprint": "fp_fake",
                    "choices": [],
                    "usage": self.usage(),
                }
            )
        yield b"[DONE]"

    def _text_chunk(self, text: str, finish: str | None) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "text_completion",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": "fp_fake",
            "choices": [{"text": text, "index": 0, "logprobs": None, "finish_reason": finish}],
        }

    def _text_events(self, include_usage: bool) -> Iterator[bytes]:
        words = self.text.split(" ")
        for i, word in enumerate(words):
            last = i == len(words) - 1
            chunk = self._text_chunk(word if last else word + " ", None)
            if last:
                chunk["choices"][0]["finish_reason"] = self.finish_reason()
            yield orjson.dumps(chunk)
        if include_usage:
            yield orjson.dumps({**self._text_chunk("", None), "choices": [], "usage": self.usage()})
        yield b"[DONE]"

    def _deltas(self) -> Iterator[tuple[dict[str, Any], str | None]]:
        yield (
            {"role": "assistant", "content": "" if not self.calls else None, "refusal": None},
            None,
        )
        if not self.calls:
            words = self.text.split(" ")
            step = self.script.words_per_chunk
            for i in range(0, len(words), step):
                piece = " ".join(words[i : i + step])
                yield {"content": piece if i + step >= len(words) else piece + " "}, None
        for index, call in enumerate(self.calls):
            yield (
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call.id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": ""},
                        }
                    ]
                },
                None,
            )
            for start in range(0, len(call.arguments), 8):
                fragment = call.arguments[start : start + 8]
                yield {"tool_calls": [{"index": index, "function": {"arguments": fragment}}]}, None
        yield {}, self.finish_reason()


def echo_prompt(request: dict[str, Any]) -> str:
    prompt = request.get("prompt")
    if isinstance(prompt, list) and prompt:
        prompt = prompt[0]
    return f"You said: {prompt}" if isinstance(prompt, str) else "You said something."


def echo(request: dict[str, Any]) -> str:
    for message in reversed(request.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            return f"You said: {content}" if isinstance(content, str) else "You said something."
    return "Hello from the fake upstream."
