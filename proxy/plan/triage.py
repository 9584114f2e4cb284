"""Before the decomposition: does the request need no tool, one call, or several?

One LLM call with a few worked examples as earlier turns (``prompts/triage.md``,
``prompts/triage_examples.json``) and a one-word answer: a small model sorts a request
far more reliably than it decomposes one. ``one`` spares the decomposition (the
request is planned as one sub-task, its values untouched), ``none`` the plan and the
tools; ``several``, and any answer that is none of the three, goes on to the
decomposition. The examples are generic, not the eval's tasks; the fixed prefix is
the same for every request, so a server with a prompt cache reads only the request.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Literal

from proxy.errors import ToolgraphError
from proxy.llm import Message, MeteredModel
from proxy.plan._llm import prompt

Sort = Literal["none", "one", "several"]
SORTS: tuple[Sort, ...] = ("none", "one", "several")
MAX_TOKENS = 4  # one word


@cache
def _examples() -> tuple[tuple[str, str], ...]:
    path = Path(__file__).parent / "prompts" / "triage_examples.json"
    pairs = json.loads(path.read_text(encoding="utf-8"))
    return tuple((str(request), str(sort)) for request, sort in pairs)


def triage_messages(conversation: str) -> list[Message]:
    messages: list[Message] = [{"role": "system", "content": prompt("triage")}]
    for request, sort in _examples():
        messages += [{"role": "user", "content": request}, {"role": "assistant", "content": sort}]
    messages.append({"role": "user", "content": conversation})
    return messages


def read_sort(text: str) -> Sort:
    """The sort a reply names first; ``several`` (decompose) when it names none."""
    words = text.strip().lower().replace(".", " ").split()
    first = words[0] if words else ""
    return next((sort for sort in SORTS if first == sort), "several")


async def triage(model: MeteredModel, conversation: str) -> Sort:
    """How many tool calls ``conversation`` needs; ``several`` when the model fails
    (the decomposition that follows meets the failure and degrades)."""
    try:
        reply = await model.reply(triage_messages(conversation), max_tokens=MAX_TOKENS)
    except ToolgraphError:
        return "several"
    return read_sort(reply.text)
