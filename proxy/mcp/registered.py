"""MCP servers added through the registry API, kept in ``<data_dir>/mcp_servers.json``.

The settings file's ``mcp_servers`` are the operator's and fixed; the ones added at
run time (``POST /v1/toolgraph/mcp/servers``, ``toolgraph mcp add``) are written
here, so that a restart and the other workers sharing the data folder start them
too. The file is replaced whole (written beside it, then renamed), so a reader never
sees half of it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

from pydantic import TypeAdapter, ValidationError

from proxy.config import McpServer

FILE_NAME = "mcp_servers.json"
_SERVERS = TypeAdapter(list[McpServer])


class RegisteredServers:
    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / FILE_NAME

    def load(self) -> list[McpServer]:
        """The servers in the file; none when there is no file. A file that does not
        parse is an error naming it (hand-edited, most likely)."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        try:
            return _SERVERS.validate_json(text)
        except ValidationError as exc:
            raise ValueError(f"{self.path}: not a list of MCP servers: {exc}") from None

    def save(self, servers: Sequence[McpServer]) -> None:
        records = [server.model_dump(mode="json", exclude_defaults=True) for server in servers]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(json.dumps(records, indent=2) + "\n", encoding="utf-8")
        os.replace(partial, self.path)
