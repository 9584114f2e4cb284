"""A ``tools/call`` result as the tool output the compressor and the answer read.

Structured content, when the server sends it, is the output (the tool's output
schema describes it, and schema edges were built from that schema). Otherwise the
content blocks are: one text block that holds JSON is that JSON, one text block is
its text, several blocks a list of them; images and audio become a short note, as no
prompt here reads bytes. A result flagged ``isError`` raises a
:class:`~proxy.errors.ToolError` with the server's own text, so the scheduler treats
it as any failed call.
"""

from __future__ import annotations

import json

from mcp import types
from pydantic import JsonValue

from proxy.errors import ToolError

_MAX_ERROR = 500


def tool_output(tool_name: str, result: types.CallToolResult) -> JsonValue:
    """The output of a successful call; :class:`ToolError` for an ``isError`` result."""
    if result.is_error:
        detail = _text_of(result)[:_MAX_ERROR] or "no detail"
        raise ToolError(f"{tool_name} failed: {detail}", param=tool_name, code="mcp_tool_error")
    if result.structured_content is not None:
        structured: JsonValue = json.loads(json.dumps(result.structured_content))
        return structured
    blocks = [_block(block) for block in result.content]
    if len(blocks) == 1:
        return _maybe_json(blocks[0])
    return blocks


def _block(block: types.ContentBlock) -> JsonValue:
    if isinstance(block, types.TextContent):
        return block.text
    if isinstance(block, types.ImageContent | types.AudioContent):
        return f"[{block.type}: {block.mime_type}, {len(block.data) * 3 // 4} bytes]"
    if isinstance(block, types.ResourceLink):
        return {"resource": str(block.uri), "name": block.name}
    if isinstance(block, types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, types.TextResourceContents):
            return {"resource": str(resource.uri), "text": resource.text}
        return {"resource": str(resource.uri), "mime_type": resource.mime_type or ""}
    return f"[{type(block).__name__}]"


def _maybe_json(value: JsonValue) -> JsonValue:
    if isinstance(value, str) and value.lstrip()[:1] in ("{", "["):
        try:
            parsed: JsonValue = json.loads(value)
            return parsed
        except json.JSONDecodeError:
            pass
    return value


def _text_of(result: types.CallToolResult) -> str:
    return " ".join(b.text for b in result.content if isinstance(b, types.TextContent)).strip()
