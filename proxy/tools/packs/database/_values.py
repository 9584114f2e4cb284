"""Database values as JSON, and the tools' argument readers."""

from __future__ import annotations

import datetime
import decimal
import math
import uuid
from collections.abc import Mapping

from pydantic import JsonValue

from proxy.errors import ToolInputRejected

_TEXT_CHARS = 500  # a longer cell is cut: one document must not fill the prompt


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
