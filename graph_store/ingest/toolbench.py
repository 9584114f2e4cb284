"""ToolBench / RapidAPI: the BEIR-style corpus (one API a line) and RapidAPI tool JSON.

Category → RapidAPI "tool" (the group) → API (the Tool). The name is the one ToolBench
showed its models, ``<api>_for_<tool>``, folded into OpenAI's alphabet; ToolBench's own
spelling is kept as an alias so that its call logs find the tool.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from pydantic import JsonValue

from graph_store.errors import InvalidItem
from graph_store.ingest._common import (
    Parsed,
    build_tool,
    json_type,
    object_schema,
    read_json,
    read_json_lines,
    text,
)
from graph_store.models import Endpoint, JsonSchema, ParamLocation, Provenance
from graph_store.names import normalise_name, tool_id

FORMAT = "toolbench"
_RESERVED = {"from", "class", "return", "false", "true", "id", "and"}
_NOT_WORD = re.compile(r"[^\u4e00-\u9fa5a-zA-Z0-9_]")


def toolbench_name(api_name: str, tool_name: str) -> str:
    """The function name ToolBench gave an API (its ``standardize`` and ``change_name``)."""
    api = _standardize(api_name)
    api = f"is_{api}" if api in _RESERVED else api
    return f"{api}_for_{_standardize(tool_name)}"[-64:]


def _standardize(value: str) -> str:
    value = re.sub(r"_+", "_", _NOT_WORD.sub("_", value)).lower().strip("_")
    return f"get_{value}" if value[:1].isdigit() else value


def parse_corpus(path: Path, progress: Callable[[int], None] | None = None) -> Parsed:
    """The BEIR-style corpus: one API per line with its tool's name and category."""
    parsed = Parsed()
    for number, row in read_json_lines(path, progress):
        if isinstance(row, InvalidItem):
            parsed.errors.append(row)
        elif not isinstance(row, dict):
            parsed.errors.append(InvalidItem(str(path), f"line {number}", "not a JSON object"))
        else:
            label = f"line {number} (_id {row.get('_id')})"
            _parse_api(parsed, path, label, row, text(row.get("category")), row)
    return parsed


def parse_rapidapi(path: Path, document: object | None = None) -> Parsed:
    """A RapidAPI tool file (``toolenv/tools/<Category>/<tool>.json``)."""
    data = read_json(path) if document is None else document
    if not isinstance(data, dict) or not isinstance(data.get("api_list"), list):
        raise InvalidItem(str(path), "document", "a RapidAPI tool needs an 'api_list' array")
    category = text(data.get("category")) or path.parent.name
    tool = {
        "tool_name": data.get("tool_name") or data.get("title") or path.stem,
        "tool_description": data.get("tool_description"),
    }
    parsed = Parsed()
    for index, api in enumerate(data["api_list"]):
        label = f"api_list[{index}]"
        if not isinstance(api, dict):
            parsed.errors.append(InvalidItem(str(path), label, "not a JSON object"))
            continue
        row = {**api, "api_name": api.get("name"), "api_description": api.get("description")}
        _parse_api(parsed, path, f"{label} ({api.get('name')})", tool, category, row)
    return parsed


def _parse_api(
    parsed: Parsed,
    path: Path,
    label: str,
    tool: dict[str, object],
    category: str,
    api: dict[str, object],
) -> None:
    api_name, tool_name = api.get("api_name"), tool.get("tool_name")
    if not isinstance(api_name, str) or not api_name or not isinstance(tool_name, str):
        parsed.errors.append(InvalidItem(str(path), label, "needs 'api_name' and 'tool_name'"))
        return
    url, method = text(api.get("url")), (text(api.get("method")) or "GET").upper()
    params, locations = _parameters(api, url, method)
    alias = toolbench_name(api_name, tool_name)
    response = api.get("response_schema")
    build_tool(
        parsed,
        path,
        label,
        {
            "id": tool_id(FORMAT, f"{category}/{tool_name}", api_name),
            "name": normalise_name(alias),
            "original_name": api_name,
            "description": text(api.get("api_description")),
            "category": category or "uncategorised",
            "group": tool_name,
            "group_description": text(tool.get("tool_description")),
            "parameters": params,
            "response_schema": response if isinstance(response, dict) else None,
            "response_example": api.get("template_response"),
            "endpoint": Endpoint(method=method, url=url, locations=locations),
            "aliases": (alias,),
            "provenance": Provenance(format=FORMAT, file=str(path), item=label),
        },
    )


def _parameters(
    api: dict[str, object], url: str, method: str
) -> tuple[JsonSchema, dict[str, ParamLocation]]:
    properties: dict[str, JsonSchema] = {}
    required: list[str] = []
    locations: dict[str, ParamLocation] = {}
    default_place = ParamLocation.QUERY if method in ("GET", "DELETE") else ParamLocation.BODY
    for key in ("required_parameters", "optional_parameters"):
        specs = api.get(key)
        for spec in specs if isinstance(specs, list) else []:
            if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
                continue
            name = spec["name"]
            schema: dict[str, JsonValue] = {
                "type": json_type(spec.get("type")),
                "description": text(spec.get("description")),
            }
            if spec.get("default") not in (None, ""):
                schema["default"] = spec["default"]
            properties[name] = schema
            if key == "required_parameters":
                required.append(name)
            locations[name] = ParamLocation.PATH if f"{{{name}}}" in url else default_place
    return object_schema(properties, required), locations
