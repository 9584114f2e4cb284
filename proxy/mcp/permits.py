"""What an MCP server added at run time (the registry API, the console, or any process
that writes the kept list) may do, checked wherever such a server is started.

Two things the admin key alone does not give: running a command on the proxy's host (a
stdio server, only with ``mcp_registry_commands``), and sending the proxy's environment
to a URL (a header ``env:NAME``, only for the names ``mcp_header_env`` lists: otherwise
an admin could have the master, admin and upstream keys sent to a listener of theirs).
The settings file's servers are the operator's and are not checked here.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from proxy.config import McpServerSettings, Settings
from proxy.errors import Forbidden

ENV_PREFIX = "env:"
log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Permits:
    commands: bool = False
    header_env: frozenset[str] = frozenset()

    @classmethod
    def from_settings(cls, settings: Settings) -> Permits:
        return cls(settings.mcp_registry_commands, frozenset(settings.mcp_header_env))

    def check(self, server: McpServerSettings) -> None:
        """Raise :class:`~proxy.errors.Forbidden` naming what ``server`` may not do."""
        if server.url is None and not self.commands:
            raise Forbidden(
                "stdio MCP servers run a command on the proxy's host: set "
                "mcp_registry_commands to add them here (HTTP servers need no setting)",
                param="command",
                code="mcp_commands_disabled",
            )
        for header, value in server.headers.items():
            name = value[len(ENV_PREFIX) :] if value.startswith(ENV_PREFIX) else None
            if name is not None and name not in self.header_env:
                raise Forbidden(
                    f"header {header} reads the environment variable {name}, which "
                    "mcp_header_env does not list",
                    param="headers",
                    code="mcp_header_env_denied",
                )

    def allowed(self, servers: Iterable[McpServerSettings], source: str) -> list[McpServerSettings]:
        """The ``servers`` (read from ``source``) that may start; each other is skipped
        with a warning that says why."""
        kept = []
        for server in servers:
            try:
                self.check(server)
            except Forbidden as exc:
                log.warning(
                    "MCP server %s from %s is not started: %s", server.name, source, exc.message
                )
                continue
            kept.append(server)
        return kept
