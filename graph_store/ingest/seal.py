"""Seal-Tools ``tool.jsonl``: typed parameters and typed responses.

``field`` is ``Category/Subfield``: the category and the group.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pydantic import JsonValue

from graph_store.errors import InvalidItem
from graph_store.ingest._common import (
    Parsed,
    build_tool,
    json_type,
    object_schema,
    read_json_lines,
    text,
)
from graph_store.models import JsonSchema, Provenance
from graph_store.names import normalise_name, tool_id

FORMAT = "seal"


def parse_seal(path: Path, progress: Callable[[int], None] | None = None) -> Parsed:
    parsed = Parsed()
    for number, row in read_json_lines(path, progress):
        if isinstance(row, InvalidItem):
            parsed.errors.append(row)
            continue
        _parse_row(parsed, path, number, row)
    return parsed


def _parse_row(parsed: Parsed, path: Path, number: int, row: object) -> None:
    name = row.get("api_name") if isinstance(row, dict) else None
    label = f"line {number}" + (f" ({name})" if isinstance(name, str) else "")
    if not isinstance(row, dict) or not isinstance(name, str) or not name:
        parsed.errors.append(InvalidItem(str(path), label, "a tool needs an 'api_name' string"))
        return
    params, responses = row.get("parameters") or {}, row.get("responses") or {}
    if not isinstance(params, dict) or not isinstance(responses, dict):
        parsed.errors.append(InvalidItem(str(path), label, "parameters/responses must be maps"))
        return
    category, _, group = text(row.get("field")).partition("/")
    required = row.get("required") or []
    build_tool(
        parsed,
        path,
        label,
        {
            "id": tool_id(FORMAT, group, name),
            "name": normalise_name(name),
            "original_name": name,
            "description": text(row.get("api_description")),
            "category": category or "uncategorised",
            "group": group or category,
            "parameters": object_schema(
                _fields(params), [str(r) for r in required] if isinstance(required, list) else []
            ),
            "response_schema": object_schema(_fields(responses), []),
            "response_example": row.get("example"),
            "provenance": Provenance(format=FORMAT, file=str(path), item=label),
        },
    )


def _fields(specs: dict[str, object]) -> dict[str, JsonSchema]:
    fields: dict[str, JsonSchema] = {}
    for name, spec in specs.items():
        info = spec if isinstance(spec, dict) else {}
        schema: dict[str, JsonValue] = {
            "type": json_type(info.get("type")),
            "description": text(info.get("description")),
        }
        fields[name] = schema
    return fields
