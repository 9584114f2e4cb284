"""OpenAI function specs: a ``tools`` array, a ``functions`` array, or bare functions.

The file's stem is the group (one file, one family of functions); a tool may name its
own ``x-category`` / ``x-group``, and where it is served in ``x-endpoint``
(``{"method": "GET", "url": "https://api.example.com/v1/items/{id}", "locations":
{"id": "path"}}``), which OpenAI's format has no field for.
"""

from __future__ import annotations

from pathlib import Path

from graph_store.errors import InvalidItem
from graph_store.ingest._common import Parsed, build_tool, read_json, text
from graph_store.models import Provenance, empty_parameters
from graph_store.names import normalise_name, tool_id

FORMAT = "openai"


def parse_openai(path: Path, document: object | None = None) -> Parsed:
    data = read_json(path) if document is None else document
    items = data.get("tools", data.get("functions")) if isinstance(data, dict) else data
    if isinstance(data, dict) and items is None and "name" in data:
        items = [data]
    if not isinstance(items, list):
        raise InvalidItem(str(path), "document", "expected a list of functions or a 'tools' array")
    parsed = Parsed()
    for index, item in enumerate(items):
        _parse_item(parsed, path, index, item)
    return parsed


def _parse_item(parsed: Parsed, path: Path, index: int, item: object) -> None:
    spec = item.get("function", item) if isinstance(item, dict) else None
    raw_name = spec.get("name") if isinstance(spec, dict) else None
    label = f"tools[{index}]" + (f" ({raw_name})" if isinstance(raw_name, str) else "")
    if not isinstance(spec, dict) or not isinstance(raw_name, str) or not raw_name.strip():
        parsed.errors.append(InvalidItem(str(path), label, "a function needs a 'name' string"))
        return
    parameters = spec.get("parameters", empty_parameters())
    if not isinstance(parameters, dict) or parameters.get("type", "object") != "object":
        parsed.errors.append(
            InvalidItem(str(path), label, "'parameters' must be a JSON Schema of type object")
        )
        return
    group = text(spec.get("x-group")) or path.stem
    build_tool(
        parsed,
        path,
        label,
        {
            "id": tool_id(FORMAT, group, raw_name),
            "name": normalise_name(raw_name),
            "original_name": raw_name,
            "description": text(spec.get("description")),
            "category": text(spec.get("x-category")) or "custom",
            "group": group,
            "parameters": {"type": "object", "properties": {}, "required": [], **parameters},
            "provenance": Provenance(format=FORMAT, file=str(path), item=label),
            "endpoint": spec.get("x-endpoint"),
        },
    )
