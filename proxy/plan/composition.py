"""A request that names several operations of the one tool a one-call plan chose.

A tool with an operation selector (a required string enum without a default, as
``vector_operation``'s ``operation``) does one of its operations per call. A request
that names two or more of the selector's values composes operations the tool does one
at a time ("the angle between a and the cross product of b and c" is a ``cross``, then
an ``angle``), however short the sentence: planned as one call, its second operation
is lost. The planner decomposes such a request after all. A value counts as named when
a word starts with it ("adding" names ``add``), as the argument writer reads an
optional enum (:func:`proxy.execute.arguments.without_unasked_options`); nothing here
knows any tool or question, only the schema.
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


def _names(words: str, value: str) -> bool:
    spelled = " ".join(re.findall(r"\w+", value.lower().replace("_", " ")))
    return bool(spelled) and re.search(rf"(?<!\w){re.escape(spelled)}", words) is not None
