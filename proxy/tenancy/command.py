"""``toolgraph keys create|list|revoke``: virtual keys from a shell.

The commands speak to the running proxy's admin API (``--proxy``, by default the
address the settings give; the admin key from ``TOOLGRAPH_ADMIN_KEY`` or the settings
file), where the keys are kept. ::

    toolgraph keys create analytics --tools 'sql_*' --packs course_assistant --rpm 60
    toolgraph keys list
    toolgraph keys revoke vk_0123456789abcdef

``create`` prints the key's secret once, on a line of its own after the key's line:
nothing can show it again. A refusal is one line on stderr and exit status 1.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, TextIO

from proxy._command import admin_request, run_reported
from proxy.config import Settings
from proxy.tenancy.keys import KEYS_PATH as PREFIX

COMMANDS = ("keys",)


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    keys = commands.add_parser("keys", help="create, list and revoke virtual keys")
    actions = keys.add_subparsers(dest="action", required=True)
    create = actions.add_parser("create", help="a new key: its secret is printed once")
    create.add_argument("name", help="what the key is for (shown in lists)")
    for flag, what in (
        ("--tools", "catalog tool names it may use (shell patterns)"),
        ("--packs", "built-in packs it may use"),
        ("--mcp-servers", "MCP servers whose tools it may use"),
    ):
        create.add_argument(flag, help=f"comma-separated {what}; none given: every tool")
    create.add_argument("--rpm", type=int, help="requests a minute")
    create.add_argument("--concurrency", type=int, help="requests at once")
    actions.add_parser("list", help="the keys, never their secrets")
    actions.add_parser("revoke", help="revoke a key at once").add_argument("id")
    for parser in actions.choices.values():
        parser.add_argument("--proxy", help="the proxy's URL (default: the settings' address)")
        parser.add_argument("--config", type=Path, help="YAML settings file")
        parser.set_defaults(host=None, port=None, workers=None)


def run_command(args: argparse.Namespace, settings: Settings, out: TextIO | None = None) -> int:
    return run_reported("toolgraph keys", lambda: _run(args, settings), out or sys.stdout)


def _run(args: argparse.Namespace, settings: Settings) -> str:
    if args.action == "create":
        created = admin_request(args, settings, "POST", PREFIX, json=key_spec(args))
        return f"{_line(created)}\n{created['key']}"
    if args.action == "list":
        keys = admin_request(args, settings, "GET", PREFIX)["data"]
        return "\n".join(_line(key) for key in keys) or "no virtual keys"
    admin_request(args, settings, "DELETE", f"{PREFIX}/{args.id}")
    return f"{args.id}: revoked"


def key_spec(args: argparse.Namespace) -> dict[str, Any]:
    """The API's key request from ``keys create``'s arguments."""
    scope = {
        field: [name.strip() for name in value.split(",") if name.strip()]
        for field, value in (
            ("tools", args.tools),
            ("packs", args.packs),
            ("mcp_servers", args.mcp_servers),
        )
        if value is not None
    }
    limits = {"requests_per_minute": args.rpm, "max_concurrent": args.concurrency}
    return {
        "name": args.name,
        "scope": scope,
        "limits": {name: value for name, value in limits.items() if value is not None},
    }


def _line(key: dict[str, Any]) -> str:
    scope = key["scope"]
    allowed = [f"{name}={','.join(scope[name])}" for name in scope if scope[name] is not None]
    limits = [f"{name}={value}" for name, value in key["limits"].items() if value is not None]
    return "  ".join(
        [key["id"], key["name"], f"…{key['hint']}", " ".join(allowed) or "every tool", *limits]
    )
