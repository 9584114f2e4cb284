"""Earlier results named in written arguments by their step ids, replaced by the values.

A planner that emits steps with ids invites the model writing a later step's arguments
to name an earlier result instead of copying it: ``{"expression": "s2 + s1"}``,
``{"scalar": "s1"}``, ``"sqrt(s1.value)"`` (issue 19's traces: a 1.5B model did so in
every run, told not to or not). LLMCompiler's planner writes ``$1`` on purpose and its
executor substitutes; here the writer is asked for values, and what it names anyway is
substituted the same way, for the results that are one number. A result that is not a
number (a list, a record of several fields) is never guessed at: its name stays, and the
tool's own error says what is wrong.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from pydantic import JsonValue

#: The fields that hold a tool's one-number answer, in the order they are looked for.
VALUE_FIELDS = ("value", "result")


def scalar_of(output: JsonValue) -> float | None:
    """The one number ``output`` stands for, if it is one: a number, or a record whose
    ``value`` (else ``result``) field is a number."""
    if isinstance(output, dict):
        output = next((output[f] for f in VALUE_FIELDS if _is_number(output.get(f))), None)
    if isinstance(output, int | float) and not isinstance(output, bool):
        return float(output)
    return None


def scalars(outputs: Mapping[str, JsonValue]) -> dict[str, float]:
    """The results among ``outputs`` (by step id) that are one number."""
    found = {step: scalar_of(output) for step, output in outputs.items()}
    return {step: value for step, value in found.items() if value is not None}


def resolve(
    arguments: Mapping[str, JsonValue], values: Mapping[str, float]
) -> dict[str, JsonValue]:
    """``arguments`` with every step id of ``values`` replaced by its number: a string
    that is only the name (``"s1"``, ``"s1.value"``) becomes the number itself, a name
    inside a longer string (an expression) its decimal text."""
    if not values:
        return dict(arguments)
    pattern = _pattern(values)
    return {key: _resolve(value, values, pattern) for key, value in arguments.items()}


def _resolve(item: JsonValue, values: Mapping[str, float], pattern: re.Pattern[str]) -> JsonValue:
    if isinstance(item, dict):
        return {key: _resolve(value, values, pattern) for key, value in item.items()}
    if isinstance(item, list):
        return [_resolve(value, values, pattern) for value in item]
    if not isinstance(item, str):
        return item
    whole = pattern.fullmatch(item.strip())
    if whole:
        return values[whole.group("step")]
    return pattern.sub(lambda match: repr(values[match.group("step")]), item)


def _pattern(values: Mapping[str, float]) -> re.Pattern[str]:
    steps = "|".join(re.escape(step) for step in sorted(values, key=len, reverse=True))
    fields = "|".join(VALUE_FIELDS)
    # not inside a longer name (xs1, s1_b) or a number (1.s1); an optional .value/.result
    return re.compile(rf"(?<![\w.])(?P<step>{steps})(?:\.(?:{fields}))?(?![\w(.])")


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
