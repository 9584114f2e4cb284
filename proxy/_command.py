"""What the proxy's own subcommands share: a refusal is one line on stderr and an exit status."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TextIO


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
