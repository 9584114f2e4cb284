"""``toolgraph mcp add|list|remove|sync``: the registry's MCP servers from a shell.

The commands speak to the running proxy's registry API (``--proxy``, by default the
address the settings give; the admin key from ``TOOLGRAPH_ADMIN_KEY`` or the settings
file), because the proxy holds the servers' sessions: a server added here starts in
the proxy at once. ::

    toolgraph mcp add files --command "npx -y @modelcontextprotocol/server-filesystem /srv/docs"
    toolgraph mcp add crm --url https://mcp.example.com/mcp --header Authorization=env:CRM_TOKEN
    toolgraph mcp list
    toolgraph mcp sync files
    toolgraph mcp remove files

A refusal is one line on stderr (the API's message) and exit status 1; bad arguments
(a ``KEY=VALUE`` without ``=``, neither a command nor a URL) exit 2.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any, TextIO

from proxy._command import CommandFailed, admin_request, run_reported
from proxy.config import Settings

COMMANDS = ("mcp",)
PATH = "/v1/toolgraph/mcp/servers"


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    mcp = commands.add_parser("mcp", help="add, list, sync and remove MCP servers")
    actions = mcp.add_subparsers(dest="action", required=True)
    add = actions.add_parser("add", help="add a server: --command or --url")
    add.add_argument("name", help="the server's name (its tools are <name>_<tool>)")
    add.add_argument(
        "--command", dest="server_command", help="stdio: the server's command line, shell-split"
    )
    add.add_argument("--url", help="streamable HTTP: the server's endpoint")
    add.add_argument("--header", action="append", default=[], help="HTTP header KEY=VALUE")
    add.add_argument("--env", action="append", default=[], help="stdio environment KEY=VALUE")
    add.add_argument("--cwd", help="stdio: the server's working directory")
    actions.add_parser("list", help="the servers, connected or not, with their tool counts")
    for action, text in (("remove", "stop a server and delete its tools"), ("sync", "list now")):
        actions.add_parser(action, help=text).add_argument("name")
    for parser in actions.choices.values():
        parser.add_argument("--proxy", help="the proxy's URL (default: the settings' address)")
        parser.add_argument("--config", type=Path, help="YAML settings file")
        parser.set_defaults(host=None, port=None, workers=None)


def run_command(args: argparse.Namespace, settings: Settings, out: TextIO | None = None) -> int:
    return run_reported("toolgraph mcp", lambda: _run(args, settings), out or sys.stdout)


def _run(args: argparse.Namespace, settings: Settings) -> str:
    if args.action == "add":
        added = admin_request(args, settings, "POST", PATH, json=server_spec(args))
        return _line(added)
    if args.action == "list":
        servers = admin_request(args, settings, "GET", PATH)["data"]
        return "\n".join(_line(server) for server in servers) or "no MCP servers"
    if args.action == "remove":
        removed = admin_request(args, settings, "DELETE", f"{PATH}/{args.name}")
        return f"{args.name}: removed, {removed['tools_deleted']} tools deleted"
    synced = admin_request(args, settings, "POST", f"{PATH}/{args.name}/sync")
    return (
        f"{args.name}: {synced['written']} tools written, {synced['deleted']} deleted, "
        f"{synced['edges']} edges, {len(synced['errors'])} refused"
    )


def server_spec(args: argparse.Namespace) -> dict[str, Any]:
    """The API's server record from ``mcp add``'s arguments."""
    if bool(args.server_command) == bool(args.url):
        raise CommandFailed("give either --command or --url, one of the two", 2)
    spec: dict[str, Any] = {"name": args.name}
    if args.url:
        spec.update(url=args.url, headers=_pairs(args.header, "--header"))
    else:
        spec.update(command=shlex.split(args.server_command), env=_pairs(args.env, "--env"))
        if args.cwd:
            spec["cwd"] = str(Path(args.cwd).resolve())
    return spec


def _pairs(items: list[str], flag: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CommandFailed(f"{flag} {item!r} is not KEY=VALUE", 2)
        pairs[key] = value
    return pairs


def _line(server: dict[str, Any]) -> str:
    state = "connected" if server["connected"] else "not connected"
    return (
        f"{server['name']}  {server['transport']}  {state}  {server['tools']} tools  "
        f"({server['source']})  {server['target']}"
    )
