"""Shrinking tool responses before an LLM reads them.

Two steps (METHOD.md §1.6): keep only the fields worth reading (the list chosen
once per tool, see :mod:`proxy.execute.fields`), then, if the text is still over
the limit, cut it deterministically: the head and the tail survive, the middle
goes, and a marker says how much. Truncation alone is the fallback when no field
list can be had, and the baseline the field selection is measured against. The
full response stays in the trace; only the compressed text goes into prompts.

Paths name fields with dots, and ``[]`` for every element of a list:
``results[].name``, ``[].id`` (a list at the top), ``rates`` (the whole object).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Protocol

from pydantic import JsonValue

from graph_store.models import Tool
from proxy import metrics
from proxy.llm import ChatModel

EVERY = "[]"
MAX_PATHS = 400


def serialize(value: JsonValue) -> str:
    """Compact JSON (strings as themselves): what a prompt would quote."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def truncate(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` characters: two thirds head, one third tail."""
    if len(text) <= limit:
        return text
    room = limit - len(_marker(len(text)))
    if room <= 0:
        return text[:limit]
    head, tail = room * 2 // 3, room - room * 2 // 3
    return text[:head] + _marker(len(text) - head - tail) + (text[-tail:] if tail else "")


def _marker(cut: int) -> str:
    return f" …[{cut} chars cut]… "


def path_tokens(path: str) -> list[str]:
    """``results[].name`` → ``["results", "[]", "name"]``."""
    tokens: list[str] = []
    for part in path.split("."):
        name = part
        brackets = 0
        while name.endswith(EVERY):
            name, brackets = name[: -len(EVERY)], brackets + 1
        if name:
            tokens.append(name)
        tokens += [EVERY] * brackets
    return tokens


def field_paths(value: JsonValue, limit: int = MAX_PATHS) -> list[str]:
    """Every leaf path of ``value`` (lists merged over their elements), in order."""
    found: dict[str, None] = {}
    _collect(value, "", found, limit)
    return list(found)


def _collect(value: JsonValue, prefix: str, found: dict[str, None], limit: int) -> None:
    if len(found) >= limit:
        return
    if isinstance(value, dict) and value:
        for key, item in value.items():
            _collect(item, f"{prefix}.{key}" if prefix else key, found, limit)
    elif isinstance(value, list) and value:
        for item in value[:5]:
            _collect(item, prefix + EVERY, found, limit)
    else:
        found[prefix] = None


Trie = dict[str, "Trie"]
_END = ""  # a key no path token can be: the path stops here, keep all below


def select_fields(value: JsonValue, paths: list[str]) -> JsonValue:
    """``value`` with only the fields at ``paths`` (and the structure around them)."""
    trie: Trie = {}
    for path in paths:
        node = trie
        for token in path_tokens(path):
            node = node.setdefault(token, {})
        node[_END] = {}
    kept = _prune(value, trie)
    return kept if kept is not _MISSING else {}


_MISSING: JsonValue = "\0missing"


def _prune(value: JsonValue, trie: Trie) -> JsonValue:
    if _END in trie:
        return value
    if isinstance(value, dict):
        kept = {}
        for key, below in trie.items():
            if key in value:
                item = _prune(value[key], below)
                if item is not _MISSING:
                    kept[key] = item
        return kept or _MISSING
    if isinstance(value, list) and EVERY in trie:
        items = [_prune(item, trie[EVERY]) for item in value]
        return [item for item in items if item is not _MISSING] or _MISSING
    return _MISSING


def known_paths(chosen: list[str], available: list[str]) -> list[str]:
    """The chosen paths that name a field (or an object or list) of ``available``."""
    prefixes = set()
    for path in available:
        tokens = path_tokens(path)
        prefixes |= {tuple(tokens[:i]) for i in range(1, len(tokens) + 1)}
    return [path for path in dict.fromkeys(chosen) if tuple(path_tokens(path)) in prefixes]


class FieldChooser(Protocol):
    async def fields_for(
        self, tool: Tool, example: JsonValue, model: ChatModel | None
    ) -> list[str] | None:
        """The paths worth keeping in ``tool``'s responses; ``None`` to keep them all."""
        ...


@dataclass(frozen=True, slots=True)
class Compressed:
    text: str
    raw_chars: int
    method: str  # none, fields, truncate, fields+truncate
    fields: tuple[str, ...] = ()

    @property
    def ratio(self) -> float:
        """Compressed size over raw size (1.0: nothing saved)."""
        return len(self.text) / self.raw_chars if self.raw_chars else 1.0


class Compressor:
    """Fields first (when a chooser is set), then head-and-tail truncation to ``limit``."""

    def __init__(self, limit: int, chooser: FieldChooser | None = None) -> None:
        self.limit = limit
        self._chooser = chooser

    async def compress(
        self,
        tool: Tool,
        output: JsonValue,
        model: ChatModel | None = None,
        *,
        choose_fields: bool = True,
    ) -> Compressed:
        """``output`` within the limit. ``choose_fields=False`` asks no model: a field list
        the chooser already holds still applies, else the output is truncated (what is
        left when the call's time runs out)."""
        raw = serialize(output)
        result = await self._shrink(tool, output, raw, model if choose_fields else None)
        metrics.TOOL_RESPONSE_BYTES.labels("raw").inc(len(raw.encode()))
        metrics.TOOL_RESPONSE_BYTES.labels("compressed").inc(len(result.text.encode()))
        return result

    async def _shrink(
        self, tool: Tool, output: JsonValue, raw: str, model: ChatModel | None
    ) -> Compressed:
        if len(raw) <= self.limit:
            return Compressed(raw, len(raw), "none")
        fields = None
        if self._chooser is not None and isinstance(output, dict | list):
            fields = await self._chooser.fields_for(tool, _example(tool, output), model)
        if not fields:
            return Compressed(truncate(raw, self.limit), len(raw), "truncate")
        text = serialize(select_fields(output, fields))
        if len(text) <= self.limit:
            return Compressed(text, len(raw), "fields", tuple(fields))
        return Compressed(truncate(text, self.limit), len(raw), "fields+truncate", tuple(fields))


def _example(tool: Tool, output: JsonValue) -> JsonValue:
    """The catalog's example response when it describes this output, else the output.

    A tool whose responses change shape with its arguments (``run_simulation``)
    gets one field list per shape, keyed by the shape's own paths.
    """
    example = tool.response_example
    if example is None:
        return output
    seen = field_paths(output)
    known = known_paths(seen, field_paths(example))
    return example if len(known) * 2 >= len(seen) else output
