"""Step 1: the conversation becomes sub-tasks ``{id, text, category, needs}``.

One LLM call (``prompts/decompose.md``); the JSON is validated (shape, unknown ids,
self-loops, cycles, empty plans, categories not in the catalog) and the list of
problems goes back to the model for a bounded number of retries. ``{"no_tools":
true}`` marks a request that needs no tool at all, but only as the first answer and
only when nothing before said a tool is needed: a retry follows an answer with
sub-tasks, and a 1.5B model's retry flipped to "no tools" for a request that needed
one; a gate sure of a tool, or a triage that answered "one" or "several", has
decided already. A category the catalog does not have is sent back like any other
problem, but in the last answer it only drops that sub-task's category (no filter on
its candidates): a 1.5B model kept naming an "Electrical" category through every retry,
and the request lost its sub-tasks to the whole-request fallback for a hint. A
decomposition that drops numbers of the request gives the request to the sub-tasks
that carry none of them (:func:`with_request_values`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import JsonValue, ValidationError

from proxy.llm import Message, MeteredModel, parse_object
from proxy.plan.model import SubTask, subtask_problems
from proxy.plan.prompting import PlanningFailed, prompt


@dataclass(frozen=True)
class Decomposition:
    subtasks: list[SubTask]
    no_tools: bool = False
    attempts: int = 1


#: Tokens of one decomposition: ~40 a sub-task, so room for about fifteen, more than
#: the selection's step budget (12 by default) can pick tools for. A bound twice as
#: high only doubled the time a weak model spent in runaway JSON (README, "Measured").
MAX_TOKENS = 640
#: The feedback when "no tools" may not be the answer.
NEEDED = 'a tool is needed for this request: answer with "subtasks", not "no_tools"'


async def decompose(
    model: MeteredModel,
    conversation: str,
    categories: Sequence[str],
    retries: int,
    *,
    tool_needed: bool = False,
) -> Decomposition:
    """Sub-tasks for ``conversation``; :class:`PlanningFailed` after ``retries`` retries.
    ``tool_needed``: something before decided a tool is needed ("no tools" is refused)."""
    system = prompt("decompose").replace("{categories}", ", ".join(categories) or "(none)")
    messages: list[Message] = [
        {"role": "system", "content": system},
        {"role": "user", "content": f"<conversation>\n{conversation}\n</conversation>"},
    ]
    problems: list[str] = []
    for attempt in range(1, retries + 2):
        reply = await model.reply(messages, max_tokens=MAX_TOKENS, json=True, purpose="decompose")
        text = reply.text
        none_allowed = attempt == 1 and not tool_needed
        last = attempt == retries + 1
        result, problems = read_decomposition(
            text, categories, none_allowed=none_allowed, strict_categories=not last
        )
        if result is not None:
            subtasks = with_request_values(result.subtasks, conversation)
            return Decomposition(subtasks, result.no_tools, attempt)
        if reply.truncated:  # a runaway answer: feedback will not bring it back
            raise PlanningFailed(
                f"the decomposition ran past its {MAX_TOKENS}-token bound: " + "; ".join(problems)
            )
        messages += [
            {"role": "assistant", "content": text},
            {
                "role": "user",
                "content": "That plan cannot be used:\n- "
                + "\n- ".join(problems)
                + "\nAnswer again with the corrected JSON object only.",
            },
        ]
    raise PlanningFailed("decomposition failed validation: " + "; ".join(problems))


_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?")


def with_request_values(subtasks: Sequence[SubTask], conversation: str) -> list[SubTask]:
    """``subtasks``, where they dropped a number of the request, with the request beside
    the text of each sub-task that carries none of its numbers.

    A sub-task's text is all its argument writer reads of the request. Asked to copy
    every value, a 1.5B model still wrote "Calculate the voltage V across the resistor."
    for a request that gave the current, the resistance and the formula, and the writer
    then made values up. Sub-tasks that keep every number are left as they are.
    """
    request = conversation.strip()
    numbers = set(_NUMBER.findall(request))
    carried = [set(_NUMBER.findall(task.text)) & numbers for task in subtasks]
    if not numbers - set[str]().union(*carried):
        return list(subtasks)
    return [
        task if kept else task.model_copy(update={"text": f"{task.text} (from: {request})"})
        for task, kept in zip(subtasks, carried, strict=True)
    ]


def read_decomposition(
    text: str,
    categories: Sequence[str],
    *,
    none_allowed: bool = True,
    strict_categories: bool = True,
) -> tuple[Decomposition | None, list[str]]:
    """The decomposition in a reply, or the problems that make it unusable;
    ``none_allowed``: whether ``{"no_tools": true}`` may be the answer;
    ``strict_categories``: whether a category outside the catalog is a problem (else
    the sub-task gets no category)."""
    data = parse_object(text)
    if data is None:
        return None, ["the answer was not one JSON object"]
    if data.get("no_tools") is True:
        if not none_allowed:
            return None, [NEEDED]
        return Decomposition([], no_tools=True), []
    raw = data.get("subtasks")
    if not isinstance(raw, list):
        return None, ["the object needs a 'subtasks' list (or \"no_tools\": true)"]
    subtasks, problems = [], []
    for i, item in enumerate(raw):
        task, problem = _subtask(i, item, categories, strict_categories)
        if task is not None:
            subtasks.append(task)
        if problem:
            problems.append(problem)
    problems += subtask_problems(subtasks) if not problems else []
    return (None, problems) if problems else (Decomposition(subtasks), [])


def _subtask(
    i: int, item: JsonValue, categories: Sequence[str], strict_categories: bool = True
) -> tuple[SubTask | None, str]:
    if not isinstance(item, dict):
        return None, f"subtasks[{i}] is not an object"
    needs = item.get("needs", [])
    if not isinstance(needs, list):
        return None, f"subtasks[{i}].needs must be a list of ids"
    category = _catalog_spelling(item.get("category"), categories)
    if category is not None and categories and category not in categories:
        if strict_categories:
            return None, f"subtasks[{i}].category {json.dumps(category)} is not a catalog category"
        category = None
    try:
        task = SubTask(
            id=str(item.get("id", "")),
            text=str(item.get("text", "")),
            category=str(category) if category is not None else None,
            needs=tuple(str(n) for n in needs),
        )
    except ValidationError:
        return None, f"subtasks[{i}] needs a non-empty 'text'"
    return task, ""


def _catalog_spelling(category: JsonValue, categories: Sequence[str]) -> JsonValue:
    """The catalog's spelling of a category the model wrote in another case: a 1.5B
    model writes "Math" for "math", and a retry for that costs a whole decomposition."""
    if not isinstance(category, str) or category in categories:
        return category
    folded = {name.casefold(): name for name in categories}
    return folded.get(category.casefold(), category)
