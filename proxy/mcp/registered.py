"""MCP servers added through the registry API, kept where every worker reads them.

The settings file's ``mcp_servers`` are the operator's and fixed; the ones added at
run time (``POST /v1/toolgraph/mcp/servers``, ``toolgraph mcp add``) are kept in a
:class:`ServerList`, so that a restart, the other workers and the other replicas
start them too:

- :class:`RedisServers`, with ``redis_url``: one hash, ``toolgraph:mcp_servers``,
  a field per server, which every replica sharing the Redis reads (each add or
  remove is one command, so two workers never lose each other's change);
- :class:`FileServers`, without: ``<data_dir>/mcp_servers.json``, which the workers
  of one host share, replaced whole (written beside it, then renamed) so that a
  reader never sees half of it.

Redis's errors are translated to :class:`~proxy.errors.StoreUnavailable` here.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from pathlib import Path
from typing import Protocol

from pydantic import TypeAdapter, ValidationError
from redis.asyncio import Redis
from redis.exceptions import RedisError

from proxy.config import McpServerSettings, Settings
from proxy.errors import StoreUnavailable

FILE_NAME = "mcp_servers.json"
REDIS_KEY = "toolgraph:mcp_servers"
#: The notices' channel for "the list changed" (proxy.orchestrate.notices).
MCP_SERVERS_CHANNEL = "toolgraph:mcp_servers"
_RECORDS = TypeAdapter(list[object])
log = logging.getLogger(__name__)


class ServerList(Protocol):
    async def load(self) -> list[McpServerSettings]:
        """The servers added through the API, by name."""
        ...

    async def put(self, server: McpServerSettings) -> None:
        """Keep ``server`` (one of the same name is replaced)."""
        ...

    async def remove(self, name: str) -> None:
        """Forget server ``name``, if it is kept."""
        ...


async def configured_servers(settings: Settings) -> list[McpServerSettings]:
    """The settings' MCP servers and those added through the registry API, for a
    command run from a shell (a name in both is the settings'). Raises
    :class:`StoreUnavailable` when Redis's list cannot be read."""
    redis = Redis.from_url(settings.redis_url) if settings.redis_url else None
    try:
        added = await open_server_list(settings.data_dir, redis).load()
    finally:
        if redis is not None:
            await redis.aclose()
    fixed = {server.name for server in settings.mcp_servers}
    return [*settings.mcp_servers, *(s for s in added if s.name not in fixed)]


def open_server_list(data_dir: Path, redis: Redis | None) -> ServerList:
    """Redis's list when there is a Redis, else the data folder's file."""
    return FileServers(data_dir) if redis is None else RedisServers(redis)


class FileServers:
    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / FILE_NAME

    async def load(self) -> list[McpServerSettings]:
        return await asyncio.to_thread(self._read)

    async def put(self, server: McpServerSettings) -> None:
        servers = [s for s in await self.load() if s.name != server.name]
        await asyncio.to_thread(self._write, sorted([*servers, server], key=_name))

    async def remove(self, name: str) -> None:
        await asyncio.to_thread(self._write, [s for s in await self.load() if s.name != name])

    def _read(self) -> list[McpServerSettings]:
        """None when there is no file; a file that does not parse is an error naming
        it (hand-edited, most likely)."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        try:
            records = _RECORDS.validate_json(text)
        except ValidationError as exc:
            raise ValueError(f"{self.path}: not a list of MCP servers: {exc}") from None
        found = (_server(record, f"{self.path} item {i}") for i, record in enumerate(records))
        return sorted((server for server in found if server is not None), key=_name)

    def _write(self, servers: list[McpServerSettings]) -> None:
        records = [_record(server) for server in servers]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(json.dumps(records, indent=2) + "\n", encoding="utf-8")
        os.replace(partial, self.path)


class RedisServers:
    def __init__(self, redis: Redis) -> None:
        self._redis = redis

    async def load(self) -> list[McpServerSettings]:
        try:
            fields = await self._redis.hgetall(REDIS_KEY)
        except (RedisError, OSError) as exc:
            raise _unavailable(exc) from None
        found = (_server(value, f"Redis {REDIS_KEY} {name!r}") for name, value in fields.items())
        return sorted((server for server in found if server is not None), key=_name)

    async def put(self, server: McpServerSettings) -> None:
        try:
            await self._redis.hset(REDIS_KEY, server.name, json.dumps(_record(server)))
        except (RedisError, OSError) as exc:
            raise _unavailable(exc) from None

    async def remove(self, name: str) -> None:
        try:
            await self._redis.hdel(REDIS_KEY, name)
        except (RedisError, OSError) as exc:
            raise _unavailable(exc) from None


def _server(record: object, where: str) -> McpServerSettings | None:
    """The server ``record`` describes; None, said in a warning, when it describes none
    (one bad entry, written by hand or by an older version, must not stop the proxy)."""
    try:
        if isinstance(record, str | bytes):
            return McpServerSettings.model_validate_json(record)
        return McpServerSettings.model_validate(record)
    except ValidationError as exc:
        problem = exc.errors()[0]
        place = ".".join(str(part) for part in problem["loc"]) or "the entry"
        log.warning("%s is not an MCP server, skipped: %s: %s", where, place, problem["msg"])
        return None


def _name(server: McpServerSettings) -> str:
    return server.name


def _record(server: McpServerSettings) -> dict[str, object]:
    return server.model_dump(mode="json", exclude_defaults=True)


def _unavailable(exc: BaseException) -> StoreUnavailable:
    return StoreUnavailable(f"the MCP server list in Redis cannot be reached: {exc}")
