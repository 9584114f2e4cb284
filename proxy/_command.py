"""What the proxy's own subcommands share: a refusal is one line on stderr and an exit
status; a request to the running proxy's admin API."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any, TextIO

import httpx

from proxy.config import Settings

#: Seconds an admin API request may take (adding an MCP server waits for its first
#: connection, its connect_timeout, 30 s by default).
ADMIN_TIMEOUT = 120.0


class CommandFailed(Exception):
    """One line for stderr, and the exit status."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


def run_reported(prefix: str, work: Callable[[], str], out: TextIO) -> int:
    """Write what ``work`` returns to ``out``: 0; or its :class:`CommandFailed` on stderr
    as ``prefix: message``: the failure's status."""
    try:
        text = work()
    except CommandFailed as exc:
        print(f"{prefix}: {exc}", file=sys.stderr)
        return exc.status
    out.write(text + "\n")
    return 0


def admin_request(
    args: argparse.Namespace,
    settings: Settings,
    method: str,
    path: str,
    timeout: float = ADMIN_TIMEOUT,
    **kwargs: Any,
) -> dict[str, Any]:
    """The running proxy's answer to an admin API request (the admin key from the
    settings), or :class:`CommandFailed` with the API's message."""
    if settings.admin_key is None:
        raise CommandFailed("set TOOLGRAPH_ADMIN_KEY (the proxy's admin key)")
    base = (args.proxy or _address(settings)).rstrip("/")
    headers = {"authorization": f"Bearer {settings.admin_key.get_secret_value()}"}
    try:
        response = httpx.request(
            method, base + path, headers=headers, timeout=timeout, trust_env=False, **kwargs
        )
    except httpx.HTTPError as exc:
        raise CommandFailed(f"cannot reach the proxy at {base}: {exc}") from None
    body: dict[str, Any] = response.json() if _is_json(response) else {}
    if response.is_error:
        error = body.get("error", {})
        raise CommandFailed(error.get("message") or f"HTTP {response.status_code}")
    return body


def _is_json(response: httpx.Response) -> bool:
    content_type: str = response.headers.get("content-type", "")
    return content_type.startswith("application/json")


def _address(settings: Settings) -> str:
    host = "127.0.0.1" if settings.host in ("0.0.0.0", "::", "") else settings.host
    return f"http://{host}:{settings.port}"
