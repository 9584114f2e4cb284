"""Earlier results named in written arguments by their step ids, replaced by the values.

A planner that emits steps with ids invites the model writing a later step's arguments
to name an earlier result instead of copying it: ``{"expression": "s2 + s1"}``,
``{"scalar": "s1"}``, ``"sqrt(s1.value)"`` (in the end-to-end traces a 1.5B model did so
in every run, told not to or not). LLMCompiler's planner writes ``$1`` on purpose and its
executor substitutes; here the writer is asked for values, and what it names anyway is
substituted the same way, for the results that are one number and for the number
fields of a record (``"s3.max_abs"``). Anything else (a list, a record named without a
field that says which number) is never guessed at: its name stays, and the tool's own
error says what is wrong.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TypeGuard

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
    """The names an argument may use for the numbers among ``outputs`` (by step id):
    ``s1`` for a result that is one number (:func:`scalar_of`), ``s1.<field>`` for each
    number field of a record (``s3.max_abs``), ``s1.value``/``s1.result`` for a bare one."""
    names: dict[str, float] = {}
    for step, output in outputs.items():
        scalar = scalar_of(output)
        if scalar is not None:
            names[step] = scalar
            names.update({f"{step}.{field}": scalar for field in VALUE_FIELDS})
        if isinstance(output, dict):
            fields = {key: value for key, value in output.items() if _is_number(value)}
            names.update({f"{step}.{key}": float(value) for key, value in fields.items()})
    return names


def resolve(
    arguments: Mapping[str, JsonValue], values: Mapping[str, float]
) -> dict[str, JsonValue]:
    """``arguments`` with every name in ``values`` (:func:`scalars`) replaced by its
    number: a string that is only the name (``"s1"``, ``"s1.value"``) becomes the number
    itself, a name inside a longer string (an expression) its decimal text."""
    if not values:
        return dict(arguments)
    return {key: _resolve(value, values) for key, value in arguments.items()}


def _resolve(item: JsonValue, values: Mapping[str, float]) -> JsonValue:
    if isinstance(item, dict):
        return {key: _resolve(value, values) for key, value in item.items()}
    if isinstance(item, list):
        return [_resolve(value, values) for value in item]
    if not isinstance(item, str):
        return item
    if item.strip() in values:
        return values[item.strip()]
    return _NAME.sub(lambda match: repr(values[match[0]]) if match[0] in values else match[0], item)


#: A name, or a name and one field (``s1``, ``s1.value``), not inside a longer name, a
#: number or a call; names that are not in the table are put back as they were.
_NAME = re.compile(r"(?<![\w.])[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)?(?![\w(.])")


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)
