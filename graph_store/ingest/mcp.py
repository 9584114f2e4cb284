"""MCP servers' tool listings: the ``tools`` of ``tools/list`` results, as JSON.

Each tool becomes a record named ``<server>_<tool>`` (folded into OpenAI's alphabet:
two servers may both offer ``search``, and the planner sees one flat catalog), with
its ``inputSchema`` as the parameters and its ``outputSchema`` as the response
schema, so that schema edges join it to other tools as they join OpenAPI operations.
The endpoint is ``mcp://<server>/<tool>``, which the executor routes to the server's
session; the provenance keeps the server, the tool's own name and the boolean hints
of its annotations (``readOnlyHint``, ``destructiveHint``…). Two names that fold into
one (``get.item`` and ``get_item``) keep it for the one that needed no folding, else
the smallest, and give the others a hash of their own name: whatever order the
server lists its tools in (a Go server's map, say), each keeps its name from one
sync to the next.

No MCP SDK here: the listing arrives as plain JSON, whoever fetched it.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from urllib.parse import quote

from pydantic import JsonValue

from graph_store.errors import InvalidItem
from graph_store.ingest._common import Parsed, build_tool, text
from graph_store.models import Endpoint, Provenance
from graph_store.names import MAX_NAME, normalise_name, short_hash, tool_id

FORMAT = "mcp"
SCHEME = "mcp://"
_HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")


def mcp_url(server: str, tool: str) -> str:
    """The endpoint URL of ``tool`` on ``server``: ``mcp://server/tool``."""
    return f"{SCHEME}{server}/{quote(tool, safe='')}"


def parse_mcp(server: str, listing: Iterable[JsonValue]) -> Parsed:
    """Tool records of one server's whole listing (every page)."""
    parsed = Parsed()
    items = list(listing)
    names = _unique_names(server, [_raw_name(item) for item in items])
    for index, item in enumerate(items):
        _parse_item(parsed, server, index, item, names)
    return parsed


def _raw_name(item: JsonValue) -> str:
    raw = item.get("name") if isinstance(item, dict) else None
    return raw if isinstance(raw, str) else ""


def _parse_item(
    parsed: Parsed, server: str, index: int, item: JsonValue, names: dict[str, str]
) -> None:
    raw = item.get("name") if isinstance(item, dict) else None
    label = f"tools[{index}]" + (f" ({raw})" if isinstance(raw, str) else "")
    if not isinstance(item, dict) or not isinstance(raw, str) or not raw.strip():
        parsed.errors.append(InvalidItem(server, label, "a tool needs a 'name' string"))
        return
    schema = item.get("inputSchema", {"type": "object"})
    if not isinstance(schema, dict) or schema.get("type", "object") != "object":
        parsed.errors.append(InvalidItem(server, label, "'inputSchema' must be of type object"))
        return
    output = item.get("outputSchema")
    build_tool(
        parsed,
        Path(server),
        label,
        {
            "id": tool_id(FORMAT, server, raw),
            "name": names[raw],
            "original_name": raw,
            "description": text(item.get("description")) or text(item.get("title")),
            "category": server,
            "group": server,
            "parameters": {"type": "object", "properties": {}, "required": [], **schema},
            "response_schema": output if isinstance(output, dict) else None,
            "endpoint": Endpoint(method="POST", url=mcp_url(server, raw)),
            "provenance": Provenance(
                format=FORMAT, file=server, item=raw, hints=_hints(item.get("annotations"))
            ),
        },
    )


def _unique_names(server: str, raws: Iterable[str]) -> dict[str, str]:
    """Each tool's catalog name by its own: the folded name goes to the tool that
    needed no folding, else to the smallest name; the others' end in a hash."""
    folded = {raw: normalise_name(f"{server}_{raw}") for raw in raws}
    names: dict[str, str] = {}
    taken: set[str] = set()
    for raw in sorted(folded, key=lambda raw: (folded[raw] != f"{server}_{raw}", raw)):
        name = folded[raw]
        if name in taken:
            name = f"{name[: MAX_NAME - 9]}_{short_hash(raw)}"
        taken.add(name)
        names[raw] = name
    return names


def _hints(annotations: JsonValue) -> dict[str, bool]:
    if not isinstance(annotations, dict):
        return {}
    return {key: value for key in _HINTS if isinstance(value := annotations.get(key), bool)}
