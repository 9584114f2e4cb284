"""``defer_loading``: the client's word on which tools select mode may leave out.

The convention the Responses API and Anthropic's tool search share, read on Chat
Completions too (an extension field, never sent upstream): a tool marked
``defer_loading: true`` (beside ``type``, or inside its ``function``) is loaded only
when the conversation needs it; every other tool is always forwarded. A request that
marks none leaves the choice to select mode over all its tools, as before.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import JsonValue

ToolSpec = dict[str, JsonValue]


def is_deferred(tool: JsonValue) -> bool:
    if not isinstance(tool, dict):
        return False
    function = tool.get("function")
    nested = isinstance(function, dict) and function.get("defer_loading") is True
    return tool.get("defer_loading") is True or nested


def unflagged(tool: JsonValue) -> JsonValue:
    """``tool`` without its ``defer_loading`` (upstreams that do not know it may refuse it)."""
    if not isinstance(tool, dict):
        return tool
    copy = {k: v for k, v in tool.items() if k != "defer_loading"}
    function = copy.get("function")
    if isinstance(function, dict) and "defer_loading" in function:
        copy["function"] = {k: v for k, v in function.items() if k != "defer_loading"}
    return copy


def split_deferred(tools: Sequence[JsonValue]) -> tuple[list[JsonValue], list[JsonValue]]:
    """(always forwarded, to choose from), both without the flag: with no tool marked,
    every tool is to choose from."""
    if not any(is_deferred(tool) for tool in tools):
        return [], [unflagged(tool) for tool in tools]
    fixed = [unflagged(tool) for tool in tools if not is_deferred(tool)]
    deferred = [unflagged(tool) for tool in tools if is_deferred(tool)]
    return fixed, deferred
