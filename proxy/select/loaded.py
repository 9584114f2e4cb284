"""The tools a conversation has loaded, kept so that the upstream's prompt cache holds.

An upstream caches a prompt by its prefix, and the ``tools`` array is near the front of
it: a selection that changes every turn pays full price for the tool definitions every
turn. So within a conversation, select mode keeps what it loaded: the tools forwarded
on an earlier turn stay, in the order they were first loaded, each as it was first
forwarded (its enum values trimmed for the question that loaded it); tools a new turn
needs are appended at the end. When nothing new is needed, the forwarded ``tools`` is
byte for byte the previous turn's.

A conversation is named by what its turns share: the client's tenant and the messages up
to its first user message (the system prompt and the opening question), the same for a
``previous_response_id`` chain, whose translated messages start the same way. Past
``retriever.select_max_loaded`` tools, the ones loaded most recently that this turn did
not select go first: the prefix holds up to the first of them. Dropping the oldest broke
it at the first tool, so from the turn a conversation reached the cap every turn missed
the cache (300 tools: the prefix share of turns 8-10 fell from about 0.75 to 0.3-0.6,
docs/benchmarks.md).

A tool the client changed since it was loaded (another definition under its name) is
loaded again in its new form, in its old place; a tool the client no longer sends
leaves.

The store is shared by every client, so it is bounded in bytes, in all
(``retriever.select_loaded_max_bytes``) and per tenant
(``retriever.select_loaded_tenant_bytes``): past its share a tenant's own oldest
conversations go, never another tenant's. A conversation is kept under its tenant's name
too, so two tenants that open a conversation alike never share it (nor one's write
count against the other).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import orjson
from pydantic import JsonValue
from redis.asyncio import Redis

from proxy.errors import StoreFull
from proxy.kv import Bound, KeyValue, open_key_value
from retriever.config import RetrieverConfig

#: Conversations whose loaded tools are kept at once; the oldest written goes first.
MAX_CONVERSATIONS = 10_000
#: One conversation's loaded tools, as forwarded: 64 definitions of 4 KB.
MAX_LOADED_BYTES = 256 * 1024

ToolSpec = dict[str, JsonValue]


@dataclass(frozen=True, slots=True)
class LoadedTool:
    """A tool as the conversation loaded it: ``digest`` names the client's definition it
    came from, ``forwarded`` is what went upstream."""

    name: str
    digest: str
    forwarded: ToolSpec


def tool_digest(tool: Mapping[str, JsonValue]) -> str:
    """A client's tool definition, named by its content (key order aside)."""
    return hashlib.sha256(orjson.dumps(tool, option=orjson.OPT_SORT_KEYS)).hexdigest()[:32]


def conversation_key(tenant: str, messages: Sequence[Mapping[str, JsonValue]]) -> str:
    """The conversation ``messages`` belong to, within ``tenant``'s: its leading
    messages up to and including the first user message."""
    leading: list[Mapping[str, JsonValue]] = []
    for message in messages:
        leading.append({"role": message.get("role"), "content": message.get("content")})
        if message.get("role") == "user":
            break
    text = orjson.dumps([tenant, leading], option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(text).hexdigest()[:40]


def merge_loaded(
    previous: Sequence[LoadedTool],
    offered: Mapping[str, str],
    selected: Sequence[LoadedTool],
    cap: int,
) -> list[LoadedTool]:
    """The conversation's tools after this turn: ``previous`` that the client still
    ``offered`` (name -> digest), each refreshed from ``selected`` when its definition
    changed, then the ``selected`` ones that are new, in their order; at most ``cap``,
    dropping the most recently loaded that this turn did not select."""
    chosen = {tool.name: tool for tool in selected}
    kept: list[LoadedTool] = []
    for tool in previous:
        digest = offered.get(tool.name)
        if digest is None:
            continue  # the client no longer sends it
        if digest != tool.digest:
            fresh = chosen.get(tool.name)
            if fresh is None:
                continue  # changed, and not needed now: gone until it is
            tool = fresh
        kept.append(tool)
    names = {tool.name for tool in kept}
    kept.extend(tool for tool in selected if tool.name not in names)
    surplus = len(kept) - cap
    if surplus <= 0:
        return kept
    droppable = [i for i, tool in enumerate(kept) if tool.name not in chosen][-surplus:]
    dropped = set(droppable)
    kept = [tool for i, tool in enumerate(kept) if i not in dropped]
    return kept[len(kept) - cap :] if len(kept) > cap else kept


class LoadedTools:
    """Each conversation's loaded tools, in a key-value store (Redis when configured, so
    every worker and replica keeps the same prefix)."""

    def __init__(self, store: KeyValue, ttl: int) -> None:
        self._store = store
        self._ttl = ttl

    @classmethod
    def open(cls, redis: Redis | None, config: RetrieverConfig) -> LoadedTools:
        """The store of ``config``'s bounds: in Redis when given, else in process."""
        bound = Bound(
            "select_loaded",
            MAX_CONVERSATIONS,
            MAX_LOADED_BYTES,
            max_bytes=config.select_loaded_max_bytes,
            tenant_bytes=config.select_loaded_tenant_bytes,
        )
        return cls(open_key_value(redis, bound), config.select_loaded_ttl_s)

    async def get(self, key: str) -> list[LoadedTool]:
        raw = await self._store.get(key)
        if raw is None:
            return []
        return [LoadedTool(str(n), str(d), f) for n, d, f in orjson.loads(raw)]

    async def put(self, key: str, tools: Sequence[LoadedTool], tenant: str) -> None:
        """Keep ``tools`` for the conversation, counted against ``tenant``'s share; a set
        too large to keep is forgotten (the next turn starts a fresh prefix) rather than
        refused."""
        value = orjson.dumps([[t.name, t.digest, t.forwarded] for t in tools])
        try:
            await self._store.put(key, value, self._ttl, tenant=tenant)
        except StoreFull:
            await self._store.delete(key)
