"""The kept list of MCP servers added through the API: the same tests over its two
backends, the data folder's file and a real Redis."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from redis.asyncio import Redis

from proxy.config import McpServerSettings
from proxy.errors import StoreUnavailable
from proxy.mcp.registered import REDIS_KEY, FileServers, RedisServers, ServerList
from tests.conftest import free_port


@pytest.fixture(params=["file", "redis"])
async def kept(
    request: pytest.FixtureRequest, tmp_path: Path, redis_server: str
) -> AsyncIterator[ServerList]:
    if request.param == "file":
        yield FileServers(tmp_path)
        return
    redis = Redis.from_url(redis_server)
    await redis.delete(REDIS_KEY)
    try:
        yield RedisServers(redis)
    finally:
        await redis.delete(REDIS_KEY)
        await redis.aclose()


def stdio(name: str, *argv: str) -> McpServerSettings:
    return McpServerSettings(name=name, command=list(argv or ["mcp-server"]), env={"KEY": "v"})


async def test_kept_replaced_and_forgotten_by_name(kept: ServerList) -> None:
    assert await kept.load() == []
    await kept.put(stdio("b"))
    await kept.put(McpServerSettings(name="a", url="https://mcp.example.com/mcp"))
    assert [s.name for s in await kept.load()] == ["a", "b"]
    await kept.put(stdio("b", "other-server", "--flag"))
    (a, b) = await kept.load()
    assert b == stdio("b", "other-server", "--flag")
    assert a.url == "https://mcp.example.com/mcp"
    await kept.remove("a")
    await kept.remove("never-kept")
    assert await kept.load() == [stdio("b", "other-server", "--flag")]


async def test_a_redis_that_cannot_be_reached_is_store_unavailable() -> None:
    redis = Redis.from_url(f"redis://127.0.0.1:{free_port()}/0")
    try:
        with pytest.raises(StoreUnavailable, match="MCP server list"):
            await RedisServers(redis).load()
        with pytest.raises(StoreUnavailable):
            await RedisServers(redis).put(stdio("a"))
    finally:
        await redis.aclose()


async def test_a_malformed_entry_is_skipped_with_a_warning(
    kept: ServerList, redis_server: str, caplog: pytest.LogCaptureFixture
) -> None:
    await kept.put(stdio("good"))
    bad = {"name": "bad", "command": ["x"], "url": "http://both/mcp"}
    if isinstance(kept, RedisServers):
        redis = Redis.from_url(redis_server)
        await redis.hset(REDIS_KEY, mapping={"bad": json.dumps(bad), "junk": "{not json"})
        await redis.aclose()
    else:
        assert isinstance(kept, FileServers)
        records = json.loads(kept.path.read_text())
        kept.path.write_text(json.dumps([*records, bad, "junk"]))
    assert [s.name for s in await kept.load()] == ["good"]
    skipped = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(skipped) == 2
    assert all("not an MCP server, skipped" in line for line in skipped)
