"""TaskBench-format catalogs: ``tool_desc.json`` and ``graph_desc.json``.

Three shapes of node occur: HuggingFace / Multimedia tools with ``input-type`` and
``output-type`` lists (resources: text, image, audio…), DailyLifeAPIs tools with a
``parameters`` list, and UltraTool tools with a ``domain``. The data set (the folder's
name) is the category; the domain, where there is one, is the group.

``graph_desc.json`` links become edges as given: a link whose type is a resource the
source outputs is a STRONG_DEP carrying that resource (every TaskBench input is
required); any other link (DailyLife's ``complete``, UltraTool's untyped ones) is a
SEQUENTIAL edge, its weight the share of the source's successors.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from pydantic import JsonValue

from graph_store.errors import InvalidItem
from graph_store.ingest._common import Parsed, build_tool, json_type, object_schema, read_json, text
from graph_store.models import Edge, EdgeKind, JsonSchema, Provenance, Tool
from graph_store.names import normalise_name, tool_id

FORMAT = "taskbench"


def dataset_name(path: Path) -> str:
    name = path.resolve().parent.name
    return name.removeprefix("data_") or "taskbench"


def parse_taskbench(path: Path, document: object | None = None) -> Parsed:
    data = read_json(path) if document is None else document
    nodes = data.get("nodes") if isinstance(data, dict) else None
    if not isinstance(nodes, list):
        raise InvalidItem(str(path), "document", "a TaskBench file needs a 'nodes' array")
    dataset = dataset_name(path)
    parsed = Parsed()
    for index, node in enumerate(nodes):
        _parse_node(parsed, path, dataset, index, node)
    return parsed


def _parse_node(parsed: Parsed, path: Path, dataset: str, index: int, node: object) -> None:
    name = node.get("id") if isinstance(node, dict) else None
    label = f"nodes[{index}]" + (f" ({name})" if isinstance(name, str) else "")
    if not isinstance(node, dict) or not isinstance(name, str) or not name:
        parsed.errors.append(InvalidItem(str(path), label, "a node needs an 'id' string"))
        return
    domain = node.get("domain")
    group = text(domain[0]) if isinstance(domain, list) and domain else dataset
    parameters, response = _schemas(node)
    build_tool(
        parsed,
        path,
        label,
        {
            "id": tool_id(FORMAT, dataset, name),
            "name": normalise_name(name),
            "original_name": name,
            "description": text(node.get("desc")),
            "category": dataset,
            "group": group,
            "parameters": parameters,
            "response_schema": response,
            "provenance": Provenance(format=FORMAT, file=str(path), item=label),
        },
    )


def _schemas(node: dict[str, object]) -> tuple[JsonSchema, JsonSchema | None]:
    properties: dict[str, JsonSchema] = {}
    params = node.get("parameters")
    for spec in params if isinstance(params, list) else []:
        if isinstance(spec, dict) and isinstance(spec.get("name"), str):
            properties[spec["name"]] = {
                "type": json_type(spec.get("type")),
                "description": text(spec.get("desc")),
            }
    inputs, outputs = node.get("input-type"), node.get("output-type")
    for resource in inputs if isinstance(inputs, list) else []:
        properties[str(resource)] = _resource(str(resource))
    response = None
    if isinstance(outputs, list):
        response = object_schema({str(r): _resource(str(r)) for r in outputs}, [])
    return object_schema(properties, list(properties)), response


def _resource(resource: str) -> JsonSchema:
    description: JsonValue = f"the {resource} (a resource: path, URL or text)"
    return {"type": "string", "description": description, "x-resource": resource}


def parse_links(path: Path, tools: dict[str, Tool]) -> tuple[list[Edge], list[InvalidItem]]:
    """The links of a ``graph_desc.json`` as edges between ``tools`` (keyed by original name)."""
    data = read_json(path)
    links = data.get("links") if isinstance(data, dict) else None
    if not isinstance(links, list):
        raise InvalidItem(str(path), "document", "a TaskBench graph needs a 'links' array")
    pairs: list[tuple[Tool, Tool, str]] = []
    errors: list[InvalidItem] = []
    for index, link in enumerate(links):
        label = f"links[{index}]"
        if not isinstance(link, dict):
            errors.append(InvalidItem(str(path), label, "not a JSON object"))
            continue
        ends = [tools.get(str(link.get(end))) for end in ("source", "target")]
        if ends[0] is None or ends[1] is None:
            missing = link.get("source") if ends[0] is None else link.get("target")
            errors.append(InvalidItem(str(path), label, f"no tool {missing!r} in the catalog"))
            continue
        pairs.append((ends[0], ends[1], text(link.get("type"))))
    return _edges(pairs), errors


def _edges(pairs: list[tuple[Tool, Tool, str]]) -> list[Edge]:
    out_degree = Counter(src.id for src, _, resource in pairs if not _carries(src, resource))
    edges = []
    for src, dst, resource in pairs:
        if _carries(src, resource):
            edges.append(
                Edge(
                    src=src.id,
                    dst=dst.id,
                    kind=EdgeKind.STRONG_DEP,
                    weight=1.0,
                    resource=resource,
                    origin=FORMAT,
                )
            )
        else:
            edges.append(
                Edge(
                    src=src.id,
                    dst=dst.id,
                    kind=EdgeKind.SEQUENTIAL,
                    weight=1.0 / out_degree[src.id],
                    count=1,
                    resource=resource,
                    origin=FORMAT,
                )
            )
    return edges


def _carries(src: Tool, resource: str) -> bool:
    outputs = (src.response_schema or {}).get("properties")
    return bool(resource) and isinstance(outputs, dict) and resource in outputs
