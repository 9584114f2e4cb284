"""Before the decomposition: does the request need no tool, one call, or several?

One LLM call with a few worked examples as earlier turns (``prompts/triage.md``,
``prompts/triage_examples.json``) and a one-word answer: a small model sorts a request
far more reliably than it decomposes one. Each request comes with the catalog's
closest tools (retrieval's first three, one line each): without them "How many of our
customers live in Germany?" reads as general knowledge, with a database's query tool
beside it as a lookup; the examples show the tools' presence alone is no reason.
``one`` spares the decomposition (the request is planned as one sub-task, its values
untouched), ``none`` the plan and the tools; ``several``, and any answer that is none
of the three, goes on to the decomposition, which may still answer "no tools" only
after an answer that is none of the three. The examples are generic, not the eval's
tasks; the fixed prefix is the same for every request, so a server with a prompt cache
reads only the request and its tools.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Literal

from proxy.errors import ToolgraphError
from proxy.llm import Message, MeteredModel
from proxy.plan.prompting import prompt

Sort = Literal["none", "one", "several"]
SORTS: tuple[Sort, ...] = ("none", "one", "several")
MAX_TOKENS = 4  # one word
CLOSEST = 3  # tools shown beside the request
DESCRIPTION_CHARS = 90  # of each one's description


@cache
def _examples() -> tuple[tuple[str, str, str], ...]:
    path = Path(__file__).parent / "prompts" / "triage_examples.json"
    rows = json.loads(path.read_text(encoding="utf-8"))
    return tuple((str(tools), str(request), str(sort)) for tools, request, sort in rows)


def triage_messages(conversation: str, closest: Sequence[str] = ()) -> list[Message]:
    """The prompt; ``closest``: the catalog's closest tools as ``name: description``."""
    messages: list[Message] = [{"role": "system", "content": prompt("triage")}]
    for tools, request, sort in _examples():
        messages += [
            {"role": "user", "content": _request(tools, request)},
            {"role": "assistant", "content": sort},
        ]
    messages.append({"role": "user", "content": _request(" | ".join(closest), conversation)})
    return messages


def _request(tools: str, request: str) -> str:
    return f"Closest tools: {tools or '(none)'}\nRequest: {request}"


def tool_line(name: str, description: str) -> str:
    """One closest tool as the prompt shows it: the name and the description's start."""
    text = " ".join(description.split())
    if len(text) > DESCRIPTION_CHARS:
        text = text[: DESCRIPTION_CHARS - 1].rstrip() + "…"
    return f"{name}: {text}" if text else name


def read_sort(text: str) -> Sort | None:
    """The sort a reply names first; None when it names none."""
    words = text.strip().lower().replace(".", " ").split()
    first = words[0] if words else ""
    return next((sort for sort in SORTS if first == sort), None)


async def triage(
    model: MeteredModel, conversation: str, closest: Sequence[str] = ()
) -> Sort | None:
    """How many tool calls ``conversation`` needs, ``closest`` tools beside it (lines of
    :func:`tool_line`); None when the model fails or names no sort: the request is
    decomposed, and the decomposition that follows decides (it meets a failure and
    degrades)."""
    messages = triage_messages(conversation, closest)
    try:
        reply = await model.reply(messages, max_tokens=MAX_TOKENS, purpose="triage")
    except ToolgraphError:
        return None
    return read_sort(reply.text)
