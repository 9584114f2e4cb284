"""What gets embedded for a tool: its document text, built from one neutral shape.

A catalog :class:`~graph_store.models.Tool`, a client's OpenAI function and a row
of a BEIR corpus all become :class:`ToolFields`, and :func:`document_text` writes
one of the variants measured in retriever/README.md:

* ``name_description``: ``"name: description"`` (the open-source selector's text);
* ``enriched``: name words, group and category, description, the group's description,
  parameter names with their descriptions and enum values.

An enum marked :data:`DATA_ENUM` lists what the data a tool reads holds now (the
database pack's table names), not what the tool does: the schema check uses it, the
document leaves it out. Written into every tool that takes a table, those names made
the helpers look like answers to any question naming a table: ``get_distinct_values``
came before ``run_select`` for "the total of all invoices of the customers in France".
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from pydantic import JsonValue

from graph_store.models import Tool
from retriever.config import DocumentVariant, RetrieverConfig

#: Characters of a group description kept in a document (they repeat across its APIs).
_GROUP_CHARS = 300
_PARAM_CHARS = 120
_ENUM_VALUES = 12
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
#: A parameter schema's keyword: its ``enum`` is the data's current values (checked, not
#: embedded).
DATA_ENUM = "x-data-enum"


@dataclass(frozen=True, slots=True)
class Param:
    name: str
    description: str = ""
    enum: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ToolFields:
    id: str
    name: str
    description: str = ""
    category: str = ""
    group: str = ""
    group_description: str = ""
    params: tuple[Param, ...] = field(default_factory=tuple)


@dataclass(frozen=True, slots=True)
class ToolDocument:
    """A tool as the index holds it; ``digest`` changes when its text does."""

    id: str
    name: str
    category: str
    group: str
    text: str
    digest: str


def name_words(name: str) -> str:
    """``getWeather_for_openWeather`` → ``get Weather for open Weather``."""
    return " ".join(_CAMEL.sub(" ", name).replace("_", " ").replace("-", " ").split())


def document_text(fields: ToolFields, variant: DocumentVariant = "enriched") -> str:
    if variant == "name_description":
        return f"{fields.name}: {fields.description}".strip()
    lines = [name_words(fields.name)]
    where = ", ".join(part for part in (fields.group, fields.category) if part)
    if where:
        lines[0] += f" ({where})"
    if fields.description:
        lines.append(fields.description)
    if fields.group_description and fields.group_description != fields.description:
        lines.append(fields.group_description[:_GROUP_CHARS])
    params = [_param_text(param) for param in fields.params]
    if params:
        lines.append("Parameters: " + "; ".join(params))
    return "\n".join(lines)


def catalog_documents(tools: Sequence[Tool], config: RetrieverConfig) -> list[ToolDocument]:
    return [make_document(tool_fields(tool), config.document) for tool in tools]


def make_document(fields: ToolFields, variant: DocumentVariant = "enriched") -> ToolDocument:
    text = document_text(fields, variant)
    return ToolDocument(
        id=fields.id,
        name=fields.name,
        category=fields.category,
        group=fields.group,
        text=text,
        digest=hashlib.blake2b(text.encode(), digest_size=16).hexdigest(),
    )


def _param_text(param: Param) -> str:
    text = name_words(param.name)
    if param.description:
        text += f" ({param.description[:_PARAM_CHARS]})"
    if param.enum:
        text += ": " + ", ".join(param.enum[:_ENUM_VALUES])
    return text


def tool_fields(tool: Tool) -> ToolFields:
    """A catalog tool (graph_store's record)."""
    return ToolFields(
        id=tool.id,
        name=tool.name,
        description=tool.description,
        category=tool.category,
        group=tool.group,
        group_description=tool.group_description,
        params=schema_params(tool.parameters),
    )


def function_fields(function: Mapping[str, JsonValue], id: str) -> ToolFields:
    """A client's OpenAI function definition (``{"name", "description", "parameters"}``)."""
    params = function.get("parameters")
    return ToolFields(
        id=id,
        name=str(function.get("name") or ""),
        description=_str(function.get("description")),
        params=schema_params(params) if isinstance(params, dict) else (),
    )


def function_name(tool: JsonValue) -> str | None:
    """A function tool's name, in Chat Completions' nested form or the Responses API's flat
    one; None for a tool of any other type."""
    if not isinstance(tool, dict) or tool.get("type") != "function":
        return None
    function = tool.get("function")
    name = function.get("name") if isinstance(function, dict) else tool.get("name")
    return name if isinstance(name, str) else None


def forced_name(tool_choice: JsonValue) -> str | None:
    """The function a Chat Completions ``tool_choice`` names, if it names one."""
    if isinstance(tool_choice, dict):
        function = tool_choice.get("function")
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            return str(function["name"])
    return None


def schema_params(schema: Mapping[str, JsonValue]) -> tuple[Param, ...]:
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return ()
    params = []
    for name, spec in properties.items():
        if not isinstance(spec, dict):
            continue
        enum = spec.get("enum")
        if not isinstance(enum, list) or spec.get(DATA_ENUM) is True:
            enum = []
        values = tuple(str(v) for v in enum)
        params.append(Param(name, _str(spec.get("description")), values))
    return tuple(params)


def corpus_fields(row: Mapping[str, JsonValue]) -> ToolFields:
    """A BEIR corpus row: plain ``title``/``text``, ToolBench's or Seal-Tools' fields, or
    the training sets' ``name``/``description``/``parameters`` (../shared/data/train)."""
    doc_id = str(row.get("_id"))
    if "api_name" not in row:
        if "name" in row and "description" in row:
            return _train_fields(row, doc_id)
        return ToolFields(id=doc_id, name=_str(row.get("title")), description=_str(row.get("text")))
    params: list[Param] = []
    for key in ("required_parameters", "optional_parameters"):
        specs = row.get(key)
        for spec in specs if isinstance(specs, list) else []:
            if isinstance(spec, dict) and isinstance(spec.get("name"), str):
                params.append(Param(str(spec["name"]), _str(spec.get("description"))))
    seal_params = row.get("parameters")
    if isinstance(seal_params, dict):
        params += schema_params({"properties": seal_params})
    category, _, subfield = _str(row.get("field") or row.get("category")).partition("/")
    return ToolFields(
        id=doc_id,
        name=_str(row.get("api_name")),
        description=_str(row.get("api_description")),
        category=category,
        group=_str(row.get("tool_name")) or subfield,
        group_description=_str(row.get("tool_description")),
        params=tuple(params),
    )


#: Where each training set keeps a tool's group and category (train/README.md).
_GROUP_KEYS = ("service", "hub", "family", "api", "suite")
_CATEGORY_KEYS = ("domain", "category")


def _train_fields(row: Mapping[str, JsonValue], doc_id: str) -> ToolFields:
    return ToolFields(
        id=doc_id,
        name=_str(row.get("name")),
        description=_str(row.get("description")),
        category=next((_str(row.get(k)) for k in _CATEGORY_KEYS if _str(row.get(k))), ""),
        group=next((_str(row.get(k)) for k in _GROUP_KEYS if _str(row.get(k))), ""),
        group_description=_str(row.get("service_description") or row.get("api_description")),
        params=_loose_params(row.get("parameters")),
    )


def _loose_params(value: JsonValue) -> tuple[Param, ...]:
    """A JSON schema, a ``{name: description}`` dict, or a list of named entries."""
    if isinstance(value, dict):
        if isinstance(value.get("properties"), dict):
            return schema_params(value)
        return tuple(
            Param(str(name), spec if isinstance(spec, str) else _str_of(spec))
            for name, spec in value.items()
        )
    if isinstance(value, list):
        return tuple(
            Param(str(item["name"]), _str(item.get("description")))
            for item in value
            if isinstance(item, dict) and isinstance(item.get("name"), str)
        )
    return ()


def _str_of(spec: JsonValue) -> str:
    if isinstance(spec, dict):
        return _str(spec.get("description"))
    return ""


def _str(value: JsonValue) -> str:
    return value.strip() if isinstance(value, str) else ""
