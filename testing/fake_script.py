"""What the fake upstream is told to answer: one :class:`Script` per request."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class FakeToolCall:
    name: str
    arguments: str
    id: str = ""


@dataclass(frozen=True)
class Script:
    """How to answer one request. ``text=None`` echoes the last user message."""

    text: str | None = None
    tool_calls: tuple[FakeToolCall, ...] = ()
    status: int = 200
    error: dict[str, Any] | None = None
    raw_body: bytes | None = None  # sent as it is, whatever the status (not JSON, say)
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    chunk_delay: float = 0.0
    words_per_chunk: int = 1
    hang: bool = False
    hang_after_events: int | None = None
    drop_after_events: int | None = None
    # Set by the test once its client has seen what came before the drop: aiohttp drops
    # data it has buffered when the connection breaks before its reader ran, so without
    # this the events before a drop reach the proxy only when the scheduler is kind.
    drop_when: threading.Event | None = None
    finish_reason: str | None = None  # e.g. "length": an answer cut at max_tokens
    # The prompt and completion tokens to report, instead of words counted
    usage: tuple[int, int] | None = None
