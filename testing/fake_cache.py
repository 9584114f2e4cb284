"""The fake upstream's prompt cache: the share of a prompt an upstream with prefix
caching would serve from what it saw before, reported as OpenAI reports it
(``usage.prompt_tokens_details.cached_tokens``).

A chat request's prompt is laid out as chat templates lay it out, the ``tools`` and then
the ``messages`` (as JSON); the part that repeats one of the last :data:`KEPT` prompts
from its first character is the cached prefix. Real upstreams cache in blocks (OpenAI:
from 1,024 tokens, by 128); this one counts every character, so a test or a benchmark
reads the exact share. With ``count_tokens`` the prompt and its prefix are counted by it
(a benchmark passes a real tokenizer); without, the answer's own count is kept and the
cached tokens are its share of it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

#: Earlier prompts a new one is compared with (a conversation's last turn is the one
#: that matters; a few more cover conversations that interleave).
KEPT = 16


@dataclass(frozen=True)
class Seen:
    """What the cache found for one prompt: the repeated share of its characters, and its
    tokens and cached tokens when the cache counts them."""

    share: float
    tokens: int | None = None
    cached: int | None = None


def prompt_text(request: dict[str, Any]) -> str:
    """The prompt as a chat template lays it out: the tools, then the messages."""
    tools = orjson.dumps(request.get("tools") or []).decode()
    return tools + orjson.dumps(request.get("messages") or []).decode()


def shared_prefix(a: str, b: str) -> int:
    """The length of the longest common prefix (binary search: C-speed comparisons)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


class PromptCache:
    def __init__(self, count_tokens: Callable[[str], int] | None = None) -> None:
        self.count_tokens = count_tokens
        self._seen: deque[str] = deque(maxlen=KEPT)

    def see(self, request: dict[str, Any]) -> Seen:
        """Look ``request``'s prompt up, then remember it."""
        prompt = prompt_text(request)
        shared = max((shared_prefix(prompt, earlier) for earlier in self._seen), default=0)
        self._seen.append(prompt)
        share = shared / len(prompt) if prompt else 0.0
        if self.count_tokens is None:
            return Seen(share)
        return Seen(share, self.count_tokens(prompt), self.count_tokens(prompt[:shared]))

    def clear(self) -> None:
        self._seen.clear()
