"""``toolgraph catalog import`` of an MCP server spec: the servers' tools into the catalog.

A spec is a small JSON or YAML file in either of two shapes: the ``mcpServers`` object
that MCP clients (Claude Desktop, Cursor…) keep their servers in, each entry a
``command`` with ``args``, ``env`` and ``cwd``, or a ``url`` with ``headers``; or
toolgraph's own ``mcp_servers`` list, as in the settings file. ::

    {"mcpServers": {"files": {"command": "npx", "args": ["-y", "server-filesystem", "/srv"]},
                    "crm": {"url": "https://mcp.example.com/mcp"}}}

Each server is connected to once (:func:`~proxy.mcp.probe.probe_server`, under the
tools' egress policy), its listing written into the graph store as a sync writes it
(:func:`~proxy.mcp.catalog.sync_server`), and the server kept in the registry's list
(:mod:`proxy.mcp.registered`), so that the proxy runs it: at once for proxies that
share a Redis (a notice tells them), else when the proxy next starts. A server the
settings file names is synced and not kept (the file is the operator's). Stdio
servers are kept without ``mcp_registry_commands`` (whoever runs this command has a
shell), but a proxy starts a kept stdio server only with that setting on: it is
checked wherever the kept list is read (:mod:`proxy.mcp.permits`), and the command's
line says so. The other paths of the
same command are files of tools, imported as before.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlsplit

import yaml
from pydantic import ValidationError
from redis.asyncio import Redis

from graph_store.store import GraphStore, open_store
from proxy._command import CommandFailed
from proxy.config import McpServerSettings, Settings
from proxy.errors import ToolgraphError
from proxy.execute.egress import EgressPolicy
from proxy.mcp.catalog import sync_server
from proxy.mcp.probe import probe_server
from proxy.mcp.registered import MCP_SERVERS_CHANNEL, ServerList, open_server_list

#: A spec is a few servers; a larger file is a catalog of tools, never read here whole.
MAX_SPEC_BYTES = 1 << 20
_SUFFIXES = (".json", ".yaml", ".yml")
_KEYS = ("mcpServers", "mcp_servers")


def is_server_spec(path: Path) -> bool:
    """Whether ``path`` is a file of MCP servers (either shape), not a file of tools."""
    if path.suffix.lower() not in _SUFFIXES or not path.is_file():
        return False
    if path.stat().st_size > MAX_SPEC_BYTES:
        return False
    try:
        loaded = _load(path)
    except (ValueError, yaml.YAMLError):
        return False  # the tools' import says what is wrong with it
    return isinstance(loaded, dict) and any(key in loaded for key in _KEYS)


def read_spec(path: Path) -> list[McpServerSettings]:
    """The servers of spec ``path``; a server that is not valid is a :class:`CommandFailed`."""
    loaded = _load(path)
    if "mcp_servers" in loaded:
        items = loaded["mcp_servers"]
    else:
        servers = loaded["mcpServers"]
        if not isinstance(servers, dict):
            raise CommandFailed(f"{path}: mcpServers is not an object of servers by name")
        items = [_from_client_entry(name, entry) for name, entry in servers.items()]
    if not isinstance(items, list):
        raise CommandFailed(f"{path}: mcp_servers is not a list")
    return [_server(path, item) for item in items]


def _server(path: Path, item: object) -> McpServerSettings:
    try:
        return McpServerSettings.model_validate(item)
    except ValidationError as exc:
        problem = exc.errors()[0]
        where = ".".join(str(part) for part in problem["loc"]) or "the server"
        name = item.get("name") if isinstance(item, dict) else None
        raise CommandFailed(f"{path}: MCP server {name!r}: {where}: {problem['msg']}") from None


def _load(path: Path) -> Any:
    text = path.read_text(encoding="utf-8")
    return json.loads(text) if path.suffix.lower() == ".json" else yaml.safe_load(text)


def _from_client_entry(name: str, entry: object) -> dict[str, object]:
    """One ``mcpServers`` entry as an ``mcp_servers`` item."""
    if not isinstance(entry, dict):
        raise CommandFailed(f"MCP server {name}: not an object")
    if entry.get("type") == "sse":
        raise CommandFailed(f"MCP server {name}: the SSE transport is not supported")
    if "url" in entry:
        return {"name": name, "url": entry["url"], "headers": entry.get("headers") or {}}
    if not entry.get("command"):
        raise CommandFailed(f"MCP server {name}: give a command or a url")
    command = [entry["command"], *(entry.get("args") or [])]
    item: dict[str, object] = {"name": name, "command": command, "env": entry.get("env") or {}}
    if entry.get("cwd"):
        item["cwd"] = entry["cwd"]
    return item


def import_specs(paths: list[Path], settings: Settings) -> tuple[list[str], list[str]]:
    """Import every server of the specs at ``paths``: (a line per server imported, a
    line per server that failed)."""
    servers = [server for path in paths for server in read_spec(path)]
    return asyncio.run(_import_all(servers, settings))


async def _import_all(
    servers: list[McpServerSettings], settings: Settings
) -> tuple[list[str], list[str]]:
    policy = EgressPolicy.from_settings(settings.executor)
    fixed = {server.name for server in settings.mcp_servers}
    redis = Redis.from_url(settings.redis_url) if settings.redis_url else None
    kept = open_server_list(settings.data_dir, redis)
    store = open_store(settings.data_dir, settings.neo4j_uri)
    done, failed = [], []
    try:
        for server in servers:
            try:
                where = _where(server, server.name in fixed, settings.mcp_registry_commands)
                done.append(await _import_one(server, policy, store, kept, where))
            except ToolgraphError as exc:
                failed.append(exc.message)
        if redis is not None and done:  # running proxies start what is now kept
            await redis.publish(MCP_SERVERS_CHANNEL, "toolgraph catalog import")
    finally:
        store.close()
        if redis is not None:
            await redis.aclose()
    return done, failed


async def _import_one(
    server: McpServerSettings,
    policy: EgressPolicy,
    store: GraphStore,
    kept: ServerList,
    where: str,
) -> str:
    if server.url is not None:
        policy.check_host(urlsplit(server.url).hostname or "")
    listing = await probe_server(server, policy)
    report = await asyncio.to_thread(sync_server, store, server.name, listing)
    if where != _FIXED:
        await kept.put(server)
    return (
        f"{server.name}: {report.written} tools written, {report.deleted} deleted, "
        f"{report.edges} edges, {len(report.errors)} refused ({where})"
    )


_FIXED = "in the settings file"


def _where(server: McpServerSettings, fixed: bool, commands: bool) -> str:
    if fixed:
        return _FIXED
    if server.url is None and not commands:
        return "kept: the proxy runs it once mcp_registry_commands is on"
    return "kept: the proxy runs it"


def import_command(args: argparse.Namespace, settings: Settings, out: TextIO) -> int:
    """``catalog import``: import the MCP server specs among ``args.paths`` and take them
    out of it (the rest are files of tools); 0, or the status of what failed, each
    failure one line on stderr."""
    specs = [path for path in args.paths if is_server_spec(path)]
    if not specs:
        return 0
    args.paths = [path for path in args.paths if path not in specs]
    try:
        done, failed = import_specs(specs, settings)
    except CommandFailed as exc:
        print(f"toolgraph: {exc}", file=sys.stderr)
        return exc.status
    for line in done:
        print(line, file=out)
    for line in failed:
        print(f"toolgraph: {line}", file=sys.stderr)
    return 1 if failed else 0
