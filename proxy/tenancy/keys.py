"""Virtual keys: client keys an admin creates and revokes, each a tenant of its own.

A key's secret (``tg-`` and 43 random URL-safe characters) is shown once, in the answer
that creates it; what is kept is its SHA-256 digest, by which a presented key is
found, and a hint (its last four characters) to tell keys apart in a list. A key
carries a tool scope (:class:`ToolScope`: the catalog tools, built-in packs and MCP
servers it may plan with or call) and limits (:class:`KeyLimits`).

Kept behind one :class:`KeyStore` protocol, with two implementations that pass one
test suite (``tests/tenancy/test_keys.py``): :class:`RedisKeys` with ``redis_url``
(every worker and replica sharing the Redis sees a key at once), :class:`FileKeys`
without (``<data_dir>/virtual_keys.json``, shared by the workers of one host, replaced
whole by a rename so that no reader sees half of it). Redis's errors are translated to
:class:`~proxy.errors.StoreUnavailable` here.
"""

from __future__ import annotations

import asyncio
import fnmatch
import hashlib
import json
import os
import secrets
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError
from redis.asyncio import Redis
from redis.exceptions import RedisError

from graph_store.models import Tool
from proxy.errors import StoreUnavailable
from proxy.tenancy import tenant_of
from retriever.documents import ToolDocument

SECRET_PREFIX = "tg-"
KEYS_PATH = "/v1/toolgraph/keys"  # the admin API's (proxy/tenancy/router.py)
FILE_NAME = "virtual_keys.json"
REDIS_KEYS = "toolgraph:virtual_keys"  # a hash: key id -> record
REDIS_DIGESTS = "toolgraph:virtual_key_digests"  # a hash: digest -> key id
#: Where a built-in pack's tools come from (their provenance file's folder).
_PACK_FOLDERS = ("builtin/", "packs/")
_MCP_FORMAT = "mcp"
T = TypeVar("T")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ToolScope(_Model):
    """The tools a key may plan with or call; a field left unset allows nothing by it,
    and a scope with all three unset allows every tool."""

    tools: list[str] | None = Field(
        default=None, description="Catalog tool names; `*` and `?` match as in a shell."
    )
    packs: list[str] | None = Field(
        default=None, description="Built-in packs, by group (`course_assistant`, a database's)."
    )
    mcp_servers: list[str] | None = Field(default=None, description="MCP servers, by name.")

    @property
    def unrestricted(self) -> bool:
        return self.tools is None and self.packs is None and self.mcp_servers is None

    def allows(self, tool: Tool) -> bool:
        if self.unrestricted:
            return True
        if any(fnmatch.fnmatchcase(tool.name, pattern) for pattern in self.tools or ()):
            return True
        source = tool.provenance
        if source.file.startswith(_PACK_FOLDERS) and tool.group in (self.packs or ()):
            return True
        return source.format == _MCP_FORMAT and source.file in (self.mcp_servers or ())

    def among(
        self, documents: Iterable[ToolDocument], read: Callable[[str], Tool | None]
    ) -> frozenset[str]:
        """The ids of the indexed tools it allows. A name is matched as it is; a tool of a
        pack's or an MCP server's group (the group names its source) is ``read`` from
        the store to check where it comes from, so only those few are read."""
        sources = {*(self.packs or ()), *(self.mcp_servers or ())}

        def allowed(doc: ToolDocument) -> bool:
            if any(fnmatch.fnmatchcase(doc.name, pattern) for pattern in self.tools or ()):
                return True
            return (
                doc.group in sources and (tool := read(doc.name)) is not None and self.allows(tool)
            )

        return frozenset(doc.id for doc in documents if allowed(doc))


class KeyLimits(_Model):
    requests_per_minute: int | None = Field(
        default=None, gt=0, description="Requests a minute; past it, 429 with retry-after."
    )
    max_concurrent: int | None = Field(
        default=None, gt=0, description="Requests at once; past it, 429 with retry-after."
    )


class KeySpec(_Model):
    """What an admin asks for: ``POST /v1/toolgraph/keys``'s body."""

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9._ -]+$")
    scope: ToolScope = Field(default_factory=ToolScope)
    limits: KeyLimits = Field(default_factory=KeyLimits)


class VirtualKey(KeySpec):
    """A kept key: never its secret, only the secret's digest."""

    id: str
    hint: str  # the secret's last four characters
    created: int
    digest: str

    @property
    def tenant(self) -> str:
        return tenant_of(f"\0virtual:{self.id}")

    def public(self) -> dict[str, object]:
        """The key as the API shows it: the digest stays here."""
        return {"object": "virtual_key", **self.model_dump(mode="json", exclude={"digest"})}


def digest_of(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def issue(spec: KeySpec) -> tuple[VirtualKey, str]:
    """A new key for ``spec`` and its secret (to be shown once, never kept)."""
    secret = SECRET_PREFIX + secrets.token_urlsafe(32)
    key = VirtualKey(
        **spec.model_dump(),
        id="vk_" + secrets.token_hex(8),
        hint=secret[-4:],
        created=int(time.time()),
        digest=digest_of(secret),
    )
    return key, secret


class KeyStore(Protocol):
    async def add(self, key: VirtualKey) -> None: ...

    async def find(self, digest: str) -> VirtualKey | None:
        """The key whose secret has ``digest``, if it is kept."""
        ...

    async def all(self) -> list[VirtualKey]:
        """Every kept key, oldest first."""
        ...

    async def remove(self, key_id: str) -> VirtualKey | None:
        """Forget key ``key_id``: the key it was, or None if none was kept."""
        ...


def open_key_store(data_dir: Path, redis: Redis | None) -> KeyStore:
    return FileKeys(data_dir) if redis is None else RedisKeys(redis)


_RECORDS = TypeAdapter(list[VirtualKey])


class FileKeys:
    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / FILE_NAME
        self._writing = asyncio.Lock()

    async def add(self, key: VirtualKey) -> None:
        async with self._writing:
            await asyncio.to_thread(self._write, [*self._read(), key])

    async def find(self, digest: str) -> VirtualKey | None:
        keys = await asyncio.to_thread(self._read)
        return next((key for key in keys if secrets.compare_digest(key.digest, digest)), None)

    async def all(self) -> list[VirtualKey]:
        return await asyncio.to_thread(self._read)

    async def remove(self, key_id: str) -> VirtualKey | None:
        async with self._writing:
            keys = await asyncio.to_thread(self._read)
            gone = next((key for key in keys if key.id == key_id), None)
            if gone is not None:
                await asyncio.to_thread(self._write, [key for key in keys if key.id != key_id])
            return gone

    def _read(self) -> list[VirtualKey]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        try:
            return _RECORDS.validate_json(text)
        except ValidationError as exc:
            raise StoreUnavailable(f"{self.path} is not a list of virtual keys: {exc}") from None

    def _write(self, keys: list[VirtualKey]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_suffix(".json.partial")
        data = [key.model_dump(mode="json") for key in keys]
        partial.write_text(json.dumps(data, indent=1), encoding="utf-8")
        os.chmod(partial, 0o600)  # digests only, but nobody else's business
        partial.replace(self.path)


class RedisKeys:
    def __init__(self, redis: Redis) -> None:
        self._redis = redis

    async def add(self, key: VirtualKey) -> None:
        async with self._redis.pipeline(transaction=True) as both:
            both.hset(REDIS_KEYS, key.id, key.model_dump_json())
            both.hset(REDIS_DIGESTS, key.digest, key.id)
            await _reached(both.execute())

    async def find(self, digest: str) -> VirtualKey | None:
        key_id = await _reached(self._redis.hget(REDIS_DIGESTS, digest))
        if key_id is None:
            return None
        return await self._get(_text(key_id))

    async def all(self) -> list[VirtualKey]:
        records = await _reached(self._redis.hvals(REDIS_KEYS))
        keys = [VirtualKey.model_validate_json(record) for record in records]
        return sorted(keys, key=lambda key: (key.created, key.id))

    async def remove(self, key_id: str) -> VirtualKey | None:
        gone = await self._get(key_id)
        if gone is not None:
            async with self._redis.pipeline(transaction=True) as both:
                both.hdel(REDIS_KEYS, key_id)
                both.hdel(REDIS_DIGESTS, gone.digest)
                await _reached(both.execute())
        return gone

    async def _get(self, key_id: str) -> VirtualKey | None:
        record = await _reached(self._redis.hget(REDIS_KEYS, key_id))
        return None if record is None else VirtualKey.model_validate_json(record)


async def _reached(command: Awaitable[T]) -> T:
    try:
        return await command
    except RedisError as exc:
        raise StoreUnavailable(f"Redis cannot be reached ({type(exc).__name__})") from None


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


class ScopedTools(Mapping[str, Tool]):
    """The tools of ``tools`` that ``scope`` allows; the others are not there at all
    (a name outside the scope reads as unknown, as another tenant's ids do)."""

    def __init__(self, tools: Mapping[str, Tool], scope: ToolScope) -> None:
        self._tools = tools
        self._scope = scope

    def __getitem__(self, name: str) -> Tool:
        tool = self._tools[name]
        if not self._scope.allows(tool):
            raise KeyError(name)
        return tool

    def __iter__(self) -> Iterator[str]:
        return (name for name in self._tools if name in self)

    def __len__(self) -> int:
        return sum(1 for _ in self)


def scoped(tools: Mapping[str, Tool], scope: ToolScope | None) -> Mapping[str, Tool]:
    """``tools`` as a key with ``scope`` sees them (None: all of them)."""
    return tools if scope is None else ScopedTools(tools, scope)
