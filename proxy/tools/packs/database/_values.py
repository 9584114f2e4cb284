"""Database values as JSON, and the tools' argument readers."""

from __future__ import annotations

import datetime
import decimal
import math
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from pydantic import JsonValue

from proxy.errors import ToolInputRejected

_TEXT_CHARS = 500  # a longer cell is cut: one document must not fill the prompt
_SCALAR_BYTES = 8  # what a number, a date or a null counts toward the answer's budget


class CellTooBig(ToolInputRejected):
    """A value a statement made is longer than its database's ``max_cell_bytes``."""

    def __init__(self, name: str, limit: int) -> None:
        super().__init__(
            f"{name}: a value the query makes is longer than max_cell_bytes ({limit} bytes); "
            "select less of it (substr, left, length)",
            param=name,
        )


@dataclass(frozen=True, slots=True)
class Fetched:
    """Rows as JSON; ``truncated`` when more were left, ``budget_spent`` when the byte
    budget, not the row cap, stopped them."""

    rows: list[JsonValue]
    truncated: bool = False
    budget_spent: bool = False


def fetch_rows(
    result: Iterable[Sequence[object]], limit: int, max_cell: int, budget: int, name: str
) -> Fetched:
    """At most ``limit`` rows of ``result``, fetched one at a time until their cells
    together pass ``budget`` bytes; a cell past ``max_cell`` is :class:`CellTooBig`."""
    rows: list[JsonValue] = []
    used = 0
    for row in result:
        if len(rows) == limit:
            return Fetched(rows, truncated=True)
        used += sum(_cell_bytes(cell, max_cell, name) for cell in row)
        if used > budget:
            return Fetched(rows, truncated=True, budget_spent=True)
        rows.append([json_value(cell) for cell in row])
    return Fetched(rows)


def _cell_bytes(cell: object, max_cell: int, name: str) -> int:
    if isinstance(cell, str):
        size = len(cell.encode("utf-8", "surrogatepass"))
    elif isinstance(cell, bytes | bytearray | memoryview):
        size = len(cell)
    else:
        size = _SCALAR_BYTES
    if size > max_cell:
        raise CellTooBig(name, max_cell)
    return size


def json_value(value: object) -> JsonValue:
    """A cell as JSON: numbers stay numbers, dates ISO text, bytes a note of their size."""
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, str):
        return value if len(value) <= _TEXT_CHARS else value[:_TEXT_CHARS] + "…"
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, bytes | bytearray | memoryview):
        return f"<{len(bytes(value))} bytes>"
    if isinstance(value, uuid.UUID | datetime.timedelta):
        return str(value)
    return json_value(str(value))


def text_argument(arguments: Mapping[str, JsonValue], name: str) -> str:
    value = arguments.get(name)
    if not isinstance(value, str) or not value.strip():
        raise ToolInputRejected(f"{name} must be a non-empty string", param=name)
    return value


def int_argument(arguments: Mapping[str, JsonValue], name: str, default: int, most: int) -> int:
    value = arguments.get(name, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ToolInputRejected(f"{name} must be a positive integer", param=name)
    return min(value, most)


def scalar_argument(arguments: Mapping[str, JsonValue], name: str) -> str | int | float:
    value = arguments.get(name)
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ToolInputRejected(f"{name} must be a string or a number", param=name)
    return value
