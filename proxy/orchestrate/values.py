"""The numbers the tools returned: named for the answering call, and looked for in its answer.

A small model given a tool's whole result sometimes answers with the symbolic part
and drops the number (``{"derivative": "...", "value": 28.76}`` answered with the
derivative alone). :func:`returned_values` lists each call's numbers by their field
(with the unit the tool gives for it, when it gives one), for the answer prompt;
:func:`states_a_value` is the check after the answer: does it hold at least one of
them, to within rounding? No LLM is involved.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from pydantic import JsonValue

from proxy.execute.scheduler import Outcome, PlanRun

#: Numbers named per call, and in all: the first of a long array say what it holds.
PER_CALL = 6
MAX_VALUES = 12
#: An answer that rounds a value to three significant digits still states it.
REL_TOL = 0.01
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_POWER = re.compile(r"\s*(?:\u00d7|x|\*|\\times|\u00b7|\\cdot)\s*10\s*\^\s*\{?\s*([-+]?\d+)\s*\}?")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")


@dataclass(frozen=True, slots=True)
class Value:
    tool: str
    field: str  # the path in the output: "value", "E_magnitude[0]"
    number: float
    unit: str = ""

    def line(self) -> str:
        unit = f" {self.unit}" if self.unit else ""
        return f"{self.tool}: {self.field} = {self.number:.6g}{unit}"


def returned_values(run: PlanRun) -> list[Value]:
    """The numbers of every successful call's output, at most :data:`PER_CALL` each."""
    values: list[Value] = []
    for record in run.records.values():
        if record.outcome is not Outcome.OK:
            continue
        output = record.output
        units = output.get("units") if isinstance(output, dict) else None
        found = _numbers(output, "", units if isinstance(units, dict) else {})
        for _, (path, number, unit) in zip(range(PER_CALL), found, strict=False):
            values.append(Value(record.node.tool, path or "result", number, unit))
    return values[:MAX_VALUES]


def _numbers(
    value: JsonValue, path: str, units: Mapping[str, JsonValue]
) -> Iterator[tuple[str, float, str]]:
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, int | float):
        if math.isfinite(value):
            yield path, float(value), _unit(path, units)
    elif isinstance(value, dict):
        for key, item in value.items():
            if key != "units":
                yield from _numbers(item, f"{path}.{key}" if path else key, units)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _numbers(item, f"{path}[{i}]", units)


def _unit(path: str, units: Mapping[str, JsonValue]) -> str:
    """The unit the output's ``units`` gives for the field (``E_magnitude`` is in E's)."""
    name = re.split(r"[.\[]", path, maxsplit=1)[0]
    for key in (name, name.removesuffix("_magnitude")):
        unit = units.get(key)
        if isinstance(unit, str):
            return unit
    return ""


def numbers_in(text: str) -> list[float]:
    """The numbers written in ``text`` (``2.1e-6``, ``2.1 x 10^-6``, ``1,234.5``)."""
    text = text.replace("\u2212", "-")
    text = _POWER.sub(lambda m: "e" + m.group(1), text)
    text = _THOUSANDS.sub("", text)
    found = []
    for match in _NUMBER.finditer(text):
        try:
            found.append(float(match.group()))
        except ValueError:
            continue
    return found


def states_a_value(answer: str, values: list[Value]) -> bool:
    """Whether ``answer`` holds one of ``values`` (to :data:`REL_TOL`); True when the
    tools returned no number to state."""
    if not values:
        return True
    written = numbers_in(answer)
    return any(
        math.isclose(number, value.number, rel_tol=REL_TOL, abs_tol=1e-12)
        for value in values
        for number in written
    )
