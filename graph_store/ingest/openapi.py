"""OpenAPI 3.0 / 3.1 documents (JSON or YAML): one Tool per operation.

``operationId`` (else ``method_path``) is the name, parameters and the JSON request body
become one JSON Schema with each field's location kept in the endpoint, ``servers[0]``
and the path make the URL, the first tag is the group and the API's title the category.
Local ``$ref``s are inlined; a cycle of references is an error for the operation that
meets it, and the other operations still import. Inlining is bounded: at most
:data:`MAX_INLINED_NODES` nodes for the whole document and :data:`MAX_SCHEMA_DEPTH`
levels in any one schema, so that a 3 KB document whose references fan out to a
million nodes, or a chain of a thousand, is refused at once with the limit it passed.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

from pydantic import JsonValue

from graph_store.errors import InvalidItem
from graph_store.ingest._common import Parsed, build_tool, object_schema, read_json, text
from graph_store.models import Endpoint, JsonSchema, ParamLocation, Provenance
from graph_store.names import normalise_name, tool_id

FORMAT = "openapi"
_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
_IN = {"path", "query", "header", "cookie"}


#: Nodes (objects, arrays and values) one document's operations inline, all together.
MAX_INLINED_NODES = 100_000
#: Levels of nesting of one inlined schema (and of the chain of references inside it).
MAX_SCHEMA_DEPTH = 64


class RefError(ValueError):
    """A ``$ref`` that cannot be inlined: a cycle, a target that is not there, or past
    the inlining limits."""


@dataclass
class _Budget:
    nodes: int = MAX_INLINED_NODES


_BUDGET: ContextVar[_Budget | None] = ContextVar("openapi_inline_budget", default=None)


def parse_openapi(path: Path, document: object | None = None) -> Parsed:
    doc = read_json(path) if document is None else document
    if not isinstance(doc, dict) or not str(doc.get("openapi", "")).startswith("3."):
        raise InvalidItem(str(path), "document", "not an OpenAPI 3.x document ('openapi: 3.x')")
    paths = doc.get("paths")
    if not isinstance(paths, dict):
        raise InvalidItem(str(path), "document", "an OpenAPI document needs a 'paths' map")
    info = doc.get("info") if isinstance(doc.get("info"), dict) else {}
    assert isinstance(info, dict)
    title = text(info.get("title")) or path.stem
    base = _server_url(doc)
    parsed = Parsed()
    token = _BUDGET.set(_Budget())
    try:
        _parse_paths(path, doc, paths, title, info, base, parsed)
    finally:
        _BUDGET.reset(token)
    return parsed


def _parse_paths(
    path: Path,
    doc: dict[str, object],
    paths: dict[str, object],
    title: str,
    info: dict[str, object],
    base: str,
    parsed: Parsed,
) -> None:
    for route, item in paths.items():
        if not isinstance(item, dict):
            parsed.errors.append(InvalidItem(str(path), f"paths.{route}", "not a path item"))
            continue
        for method in _METHODS:
            if isinstance(item.get(method), dict):
                label = f"{method.upper()} {route}"
                try:
                    values = _operation(doc, route, method, item, base)
                except RefError as exc:
                    parsed.errors.append(InvalidItem(str(path), label, str(exc)))
                    continue
                values["id"] = tool_id(FORMAT, title, str(values["original_name"]))
                values["category"] = text(doc.get("x-category")) or title
                values["group"] = values.pop("group", None) or title
                values["group_description"] = text(info.get("description"))
                values["provenance"] = Provenance(format=FORMAT, file=str(path), item=label)
                build_tool(parsed, path, label, values)


def _operation(
    doc: dict[str, object], route: str, method: str, item: dict[str, object], base: str
) -> dict[str, object]:
    operation = item[method]
    assert isinstance(operation, dict)
    original = text(operation.get("operationId")) or f"{method}_{route}"
    properties: dict[str, JsonSchema] = {}
    required: list[str] = []
    locations: dict[str, ParamLocation] = {}
    shared, own = item.get("parameters"), operation.get("parameters")
    raws = [*(shared if isinstance(shared, list) else []), *(own if isinstance(own, list) else [])]
    for raw in raws:
        param = resolve(doc, raw)
        if not isinstance(param, dict) or param.get("in") not in _IN or "name" not in param:
            continue
        name = str(param["name"])
        schema = param.get("schema") if isinstance(param.get("schema"), dict) else {}
        assert isinstance(schema, dict)
        properties[name] = {**schema, "description": text(param.get("description"))}
        locations[name] = ParamLocation(str(param["in"]))
        if param.get("required") or param["in"] == "path":
            required.append(name)
    body = _json_content(resolve(doc, operation.get("requestBody")))
    if body is not None:
        _merge_body(body, properties, required, locations)
    tags = operation.get("tags")
    return {
        "name": normalise_name(original),
        "original_name": original,
        "description": text(operation.get("description")) or text(operation.get("summary")),
        "group": text(tags[0]) if isinstance(tags, list) and tags else None,
        "parameters": object_schema(properties, required),
        "response_schema": _response(doc, operation),
        "response_example": _example(doc, operation),
        "endpoint": Endpoint(method=method.upper(), url=base + route, locations=locations),
    }


def _merge_body(
    body: dict[str, JsonValue],
    properties: dict[str, JsonSchema],
    required: list[str],
    locations: dict[str, ParamLocation],
) -> None:
    fields = body.get("properties")
    if body.get("type", "object") == "object" and isinstance(fields, dict):
        for name, schema in fields.items():
            properties[name] = schema if isinstance(schema, dict) else {}
            locations[name] = ParamLocation.BODY
        needed = body.get("required")
        required += [str(n) for n in needed] if isinstance(needed, list) else []
    else:
        properties["body"] = body
        locations["body"] = ParamLocation.BODY
        required.append("body")


def _json_content(holder: object) -> dict[str, JsonValue] | None:
    content = holder.get("content") if isinstance(holder, dict) else None
    if not isinstance(content, dict) or not content:
        return None
    media = content.get("application/json") or next(iter(content.values()))
    schema = media.get("schema") if isinstance(media, dict) else None
    return schema if isinstance(schema, dict) else None


def _success(doc: dict[str, object], operation: dict[str, object]) -> object:
    responses = operation.get("responses")
    if not isinstance(responses, dict):
        return None
    for status in ("200", "201", "2XX", "default"):
        if status in responses:
            return resolve(doc, responses[status])
    return None


def _response(doc: dict[str, object], operation: dict[str, object]) -> JsonSchema | None:
    return _json_content(_success(doc, operation))


def _example(doc: dict[str, object], operation: dict[str, object]) -> JsonValue:
    response = _success(doc, operation)
    content = response.get("content") if isinstance(response, dict) else None
    media = content.get("application/json") if isinstance(content, dict) else None
    if not isinstance(media, dict):
        return None
    if "example" in media:
        example: JsonValue = media["example"]
        return example
    examples = media.get("examples")
    if isinstance(examples, dict) and examples:
        first = next(iter(examples.values()))
        return first.get("value") if isinstance(first, dict) else None
    return None


def resolve(
    doc: dict[str, object], node: object, trail: tuple[str, ...] = (), depth: int = 0
) -> JsonValue:
    """``node`` with every local ``$ref`` inlined; :class:`RefError` on a cycle or past
    the limits (within :func:`parse_openapi`, the document's node budget too)."""
    _spend(depth + len(trail))
    if isinstance(node, list):
        return [resolve(doc, item, trail, depth + 1) for item in node]
    if not isinstance(node, dict):
        return node  # type: ignore[return-value]
    ref = node.get("$ref")
    if isinstance(ref, str):
        if ref in trail:
            raise RefError("$ref cycle: " + " -> ".join([*trail[trail.index(ref) :], ref]))
        return resolve(doc, _target(doc, ref), (*trail, ref), depth)
    return {str(key): resolve(doc, value, trail, depth + 1) for key, value in node.items()}


def _spend(depth: int) -> None:
    if depth > MAX_SCHEMA_DEPTH:
        raise RefError(
            f"a schema nests deeper than {MAX_SCHEMA_DEPTH} levels (references included) "
            "once its $refs are inlined"
        )
    budget = _BUDGET.get()
    if budget is None:
        return
    budget.nodes -= 1
    if budget.nodes < 0:
        raise RefError(
            f"inlining the $refs makes more than {MAX_INLINED_NODES} schema nodes; "
            "the document repeats too much through its references"
        )


def _target(doc: dict[str, object], ref: str) -> object:
    if not ref.startswith("#/"):
        raise RefError(f"$ref {ref!r} points outside the document")
    node: object = doc
    for part in ref[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or part not in node:
            raise RefError(f"$ref {ref!r} points nowhere")
        node = node[part]
    return node


def _server_url(doc: dict[str, object]) -> str:
    servers = doc.get("servers")
    server = servers[0] if isinstance(servers, list) and servers else {}
    if not isinstance(server, dict):
        return ""
    url = text(server.get("url"))
    variables = server.get("variables")
    for name, spec in (variables if isinstance(variables, dict) else {}).items():
        if isinstance(spec, dict) and "default" in spec:
            url = url.replace(f"{{{name}}}", str(spec["default"]))
    return url.rstrip("/")
