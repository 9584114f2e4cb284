"""A request that names several operations of the one tool a one-call plan chose.

A tool with an operation selector (a required string enum without a default, as
``vector_operation``'s ``operation``) does one of its operations per call. A request
that names two or more of the selector's values composes operations the tool does one
at a time ("the angle between a and the cross product of b and c" is a ``cross``, then
an ``angle``), however short the sentence: planned as one call, its second operation
is lost. The planner decomposes such a request after all. A value counts as named when
a word starts with it ("adding" names ``add``), as the argument writer reads an
optional enum (:func:`proxy.execute.arguments.without_unasked_options`), or when the
noun English uses for an arithmetic verb names it ("the magnitude of the sum" names
``add`` and ``magnitude``); nothing here knows any tool or question, only the schema
and those nouns.

:func:`composition_steps` orders the named operations innermost first: English nests a
composition outermost first ("the magnitude of the sum": the sum is taken first) unless
it says the order in words ("add them, then take the magnitude").
"""

from __future__ import annotations

import re

from graph_store.models import Tool


def operations_named(tool: Tool, text: str) -> dict[str, list[str]]:
    """Per operation selector of ``tool``, its values ``text`` names, when two or more."""
    words = " ".join(re.findall(r"\w+", text.lower()))
    required = set(tool.required_params())
    named = {}
    for name, schema in tool.param_schemas().items():
        values = schema.get("enum")
        if name not in required or "default" in schema or not isinstance(values, list):
            continue
        found = [str(v) for v in values if _names(words, str(v))]
        if len(found) >= 2:
            named[name] = found
    return named


#: The nouns of arithmetic verbs: a request says "the sum", a schema says ``add``.
#: "product" is left out: "dot product" and "cross product" name operations of their own.
NOUNS = {
    "add": ("sum",),
    "subtract": ("difference",),
    "divide": ("quotient",),
}


#: Words that put a request's steps in the order they are written.
_IN_ORDER = re.compile(r"\b(then|after|afterwards|next|finally|followed by)\b")


def composition_steps(tool: Tool, text: str) -> tuple[str, list[str]] | None:
    """The operation selector of ``tool`` that ``text`` names two or more values of, and
    those values in the order they must run (innermost first); None when there is none."""
    named = operations_named(tool, text)
    if not named:
        return None
    param, values = next(iter(named.items()))
    words = " ".join(re.findall(r"\w+", text.lower()))
    ordered = sorted(values, key=lambda value: _first_mention(words, value))
    return param, ordered if _IN_ORDER.search(words) else ordered[::-1]


def _first_mention(words: str, value: str) -> int:
    spelled = " ".join(re.findall(r"\w+", value.lower().replace("_", " ")))
    forms = [rf"(?<!\w){re.escape(spelled)}"]
    forms += [rf"\b{noun}s?\b" for noun in NOUNS.get(spelled, ())]
    found = [m.start() for form in forms if (m := re.search(form, words))]
    return min(found, default=len(words))


def _names(words: str, value: str) -> bool:
    spelled = " ".join(re.findall(r"\w+", value.lower().replace("_", " ")))
    if not spelled:
        return False
    if re.search(rf"(?<!\w){re.escape(spelled)}", words):
        return True
    return any(re.search(rf"\b{noun}s?\b", words) for noun in NOUNS.get(spelled, ()))
