"""The search query for a conversation: its recent user turns, newest first.

A follow-up like "and tomorrow?" carries no tool words of its own; the turns before
it do. The newest turn comes first so that it weighs most where the text is cut.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import JsonValue

#: Characters of the query; the encoder reads at most 256 tokens anyway.
MAX_QUERY_CHARS = 2000


def message_text(message: Mapping[str, JsonValue]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content.strip()
    if isinstance(content, list):
        parts = [
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and part.get("type") == "text"
        ]
        return " ".join(p.strip() for p in parts if p.strip())
    return ""


def conversation_query(messages: Sequence[Mapping[str, JsonValue]], turns: int) -> str:
    """The last ``turns`` user messages, newest first; the system prompt when there are none."""
    texts = [
        text
        for message in reversed(messages)
        if message.get("role") == "user" and (text := message_text(message))
    ][:turns]
    if not texts:
        texts = [
            text
            for message in messages
            if message.get("role") in ("system", "developer") and (text := message_text(message))
        ][:1]
    return "\n".join(texts)[:MAX_QUERY_CHARS]
