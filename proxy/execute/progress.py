"""Progress that a running tool reports, told to whoever runs the plan.

A tool call's progress (MCP's ``notifications/progress``) arrives deep under the
executor, in the session of the tool's server, while the one who can show it is the
request (orchestrate mode's ``say``: ``delta.reasoning_content`` when the client asked
for progress). The request sets its reporter with :func:`reported_to` around the
plan's execution; every call task the scheduler starts inherits it (asyncio copies the
context into each task), and a tool source reads it with :func:`reporter`. Nothing is
reported where no one set one (``toolgraph tools call``, ``/mcp``'s ``call_tool``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

Report = Callable[[str], None]

_REPORT: ContextVar[Report | None] = ContextVar("toolgraph_tool_progress", default=None)


@contextmanager
def reported_to(report: Report) -> Iterator[None]:
    """Tool progress goes to ``report`` inside the block (and the tasks it starts)."""
    token = _REPORT.set(report)
    try:
        yield
    finally:
        _REPORT.reset(token)


def reporter() -> Report | None:
    return _REPORT.get()


def progress_line(tool: str, progress: float, total: float | None, message: str | None) -> str:
    """One progress report as the client reads it: ``tool: message (3/10)``."""
    count = f"{progress:g}/{total:g}" if total else f"{progress:g}"
    return f"{tool}: {message} ({count})" if message else f"{tool}: {count}"
