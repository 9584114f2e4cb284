"""Which fields of a tool's responses to keep: asked of an LLM once per tool, then cached.

The LLM sees the tool's name and description and the field paths of an example
response (the catalog's, or the first real one), with rules and worked examples
(``prompts/select_fields.md``); it answers ``{"keep": [...]}``. Only paths that
exist in the example are kept. The answer is cached per tool and per version of
its description and example, in process or in Redis (shared by every pod);
concurrent first calls for one tool share one LLM call. When the LLM fails or
answers nonsense, the result is "no list" and the response is truncated instead;
that outcome is cached too, for a shorter time, so a broken model is not asked on
every call.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
from pathlib import Path

from pydantic import JsonValue

from graph_store.models import Tool
from proxy import metrics
from proxy.errors import ToolgraphError
from proxy.execute.compress import field_paths, known_paths
from proxy.kv import KeyValue
from proxy.llm import ChatModel, Message

log = logging.getLogger(__name__)

CACHE_NAME = "compress_fields"
PROMPT = (Path(__file__).parent / "prompts" / "select_fields.md").read_text(encoding="utf-8")
_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


class FieldSelector:
    """Chooses, caches and shares each tool's field list."""

    def __init__(
        self,
        cache: KeyValue,
        *,
        max_fields: int = 20,
        ttl_s: int = 7 * 24 * 3600,
        failure_ttl_s: int = 600,
    ) -> None:
        self._cache = cache
        self._max_fields = max_fields
        self._ttl_s = ttl_s
        self._failure_ttl_s = failure_ttl_s
        self._pending: dict[str, asyncio.Future[list[str]]] = {}

    async def fields_for(
        self, tool: Tool, example: JsonValue, model: ChatModel | None
    ) -> list[str] | None:
        available = field_paths(example)
        if not available:
            return None
        key = cache_key(tool, available)
        cached = _decode(await self._cache.get(key))
        metrics.CACHE_LOOKUPS.labels(CACHE_NAME, "miss" if cached is None else "hit").inc()
        if cached is not None:
            return cached or None
        if model is None:
            return None
        pending = self._pending.get(key)
        if pending is None:
            pending = asyncio.ensure_future(self._choose(key, tool, available, model))
            self._pending[key] = pending
            pending.add_done_callback(lambda _: self._pending.pop(key, None))
        return await asyncio.shield(pending) or None

    async def _choose(
        self, key: str, tool: Tool, available: list[str], model: ChatModel
    ) -> list[str]:
        try:
            messages = self._messages(tool, available)
            reply = await model.reply(
                messages, max_tokens=400, json=True, purpose="fields", about=tool.name
            )
            chosen = known_paths(parse_keep(reply.text), available)[: self._max_fields]
        except ToolgraphError as exc:
            log.warning("field selection for %s failed: %s", tool.name, exc.message)
            chosen = []
        ttl = self._ttl_s if chosen else self._failure_ttl_s
        await self._cache.put(key, json.dumps(chosen).encode(), ttl)
        return chosen

    def _messages(self, tool: Tool, available: list[str]) -> list[Message]:
        listing = "\n".join(f"- {path}" for path in available)
        user = (
            f"Tool: {tool.name}\nDescription: {tool.description or '(none)'}\n\n"
            f"Fields of its response:\n{listing}"
        )
        system = PROMPT.replace("{max_fields}", str(self._max_fields))
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def parse_keep(text: str) -> list[str]:
    """The ``keep`` list of a reply, tolerating prose or code fences around the JSON."""
    match = _JSON_OBJECT.search(text)
    if match is None:
        return []
    try:
        value = json.loads(match.group(0))
    except json.JSONDecodeError:
        return []
    keep = value.get("keep") if isinstance(value, dict) else None
    return [item for item in keep if isinstance(item, str)] if isinstance(keep, list) else []


def cache_key(tool: Tool, available: list[str]) -> str:
    digest = hashlib.blake2b(
        "\0".join([tool.id, tool.description, *available]).encode(), digest_size=16
    ).hexdigest()
    return f"fields:{digest}"


def _decode(raw: bytes | None) -> list[str] | None:
    if raw is None:
        return None
    value = json.loads(raw)
    return [str(item) for item in value] if isinstance(value, list) else None


# Field names that describe a response rather than answer anything (METHOD.md §1.6's
# "versions, timestamps, irrelevant fields"), matched on a path's last name.
_NOISE = re.compile(
    r"(^|_)(version|v|api_?version|timestamp|ts|created(_at)?|updated(_at)?|modified|"
    r"etag|request_?id|trace_?id|status(_?code)?|success|message|msg|code|error|errors|"
    r"page|page_?size|per_?page|offset|limit|total(_?pages|_?count)?|count|next|prev(ious)?|"
    r"cursor|links?|href|url|uri|self|image|img|thumbnail|thumb|icon|logo|avatar|photo|"
    r"copyright|license|disclaimer|terms|rate_?limit|meta|metadata|debug|tracking|pixel)$",
    re.IGNORECASE,
)


def rule_based_fields(available: list[str]) -> list[str]:
    """The LLM-free choice: every path whose own name is not metadata-like.

    The baseline an LLM's choice must beat, and what ``bench_compression`` measures
    where no capable model runs.
    """
    kept = []
    for path in available:
        names = [token for token in path.replace("[]", "").split(".") if token]
        if names and not any(_NOISE.search(_snake(name)) for name in names):
            kept.append(path)
    return kept


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


class RuleFieldChooser:
    """A :class:`~proxy.execute.compress.FieldChooser` that asks no one."""

    async def fields_for(
        self, tool: Tool, example: JsonValue, model: ChatModel | None
    ) -> list[str] | None:
        return rule_based_fields(field_paths(example)) or None
