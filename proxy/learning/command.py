"""``toolgraph learning list|show|export|reset``: learned state from a shell.

The commands speak to the running proxy's admin API (``--proxy``, by default the
address the settings give; the admin key from ``TOOLGRAPH_ADMIN_KEY`` or the settings
file), as ``toolgraph keys`` does. A tenant is its id or a virtual key's id. ::

    toolgraph learning list
    toolgraph learning show vk_0123456789abcdef
    toolgraph learning export 5f0c… > learned.json
    toolgraph learning reset vk_0123456789abcdef

``show`` prints the tenant's most observed edges, one a line; ``export`` everything
as JSON. A refusal is one line on stderr and exit status 1.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from proxy._command import admin_request, run_reported
from proxy.config import Settings

COMMANDS = ("learning",)
PREFIX = "/v1/toolgraph/learning"  # the admin API's (proxy/learning/router.py)
#: Lines ``show`` prints per kind.
SHOWN = 20


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    learning = commands.add_parser("learning", help="inspect, export and reset learned state")
    actions = learning.add_subparsers(dest="action", required=True)
    actions.add_parser("list", help="the tenants with learned state")
    for action, what in (
        ("show", "a tenant's most observed edges"),
        ("export", "everything a tenant learned, as JSON"),
        ("reset", "forget what a tenant learned"),
    ):
        actions.add_parser(action, help=what).add_argument(
            "tenant", help="a tenant id or a virtual key id"
        )
    for parser in actions.choices.values():
        parser.add_argument("--proxy", help="the proxy's URL (default: the settings' address)")
        parser.add_argument("--config", type=Path, help="YAML settings file")
        parser.set_defaults(host=None, port=None, workers=None)


def run_command(args: argparse.Namespace, settings: Settings, out: TextIO | None = None) -> int:
    return run_reported("toolgraph learning", lambda: _run(args, settings), out or sys.stdout)


def _run(args: argparse.Namespace, settings: Settings) -> str:
    if args.action == "list":
        listed = admin_request(args, settings, "GET", PREFIX)
        lines = [f"{t['tenant']}  {'on' if t['enabled'] else 'off'}" for t in listed["data"]]
        return "\n".join(lines) or "no tenant has learned state"
    if args.action == "reset":
        gone = admin_request(args, settings, "DELETE", f"{PREFIX}/{args.tenant}")
        return f"{gone['tenant']}: reset ({gone['counts']} counts forgotten)"
    state = admin_request(args, settings, "GET", f"{PREFIX}/{args.tenant}")
    if args.action == "export":
        return json.dumps(state, indent=2, ensure_ascii=False)
    return show(state)


def show(state: dict[str, Any]) -> str:
    """A tenant's state as lines: its edges, picks and select-mode uses, most seen first."""
    lines = [f"tenant {state['tenant']} (learning {'on' if state['enabled'] else 'off'})"]
    lines.append(f"{len(state['edges'])} edges")
    lines += [
        f"  {e['source']} -> {e['target']}: {e['succeeded']} ok, {e['failed']} failed"
        for e in state["edges"][:SHOWN]
    ]
    lines.append(f"{len(state['picks'])} picks")
    lines += [
        f"  {p['chosen']} over {p['beaten']}: {p['succeeded']} ok, {p['failed']} failed"
        for p in state["picks"][:SHOWN]
    ]
    lines.append(f"{len(state['select'])} select-mode tools")
    lines += [
        f"  {s['tool']}: called {s['called']}, not called {s['not_called']}"
        for s in state["select"][:SHOWN]
    ]
    served = state.get("served", [])
    lines.append(f"{len(served)} served queries")
    lines += [
        f"  {s['tool']} <- {s['query']!r}: {s['succeeded']} ok, {s['failed']} failed"
        for s in served[:SHOWN]
    ]
    return "\n".join(lines)
