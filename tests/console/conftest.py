"""The console's tests use orchestrate mode's fixtures (the scripted fake LLM, local
HTTP tools, the no-tool gate off) and, in a real browser, Debian's chromium driven by
Playwright: one tab per :class:`Console`, which records console errors and failed
requests.

Each page's screenshot is saved under the test's tmp_path, and under
``$CONSOLE_SCREENSHOTS`` when set (docs/console.md's come from there).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ServerThread, StartProxy, unavailable
from tests.orchestrate.conftest import (
    ADMIN,
    LocalTools,
    _no_gate,
    brain,
    http_tool,
    local_tools,
    register,
)

__all__ = ["_no_gate", "brain", "local_tools"]

KEY = "sk-master-0123456789"
WAIT_MS = 240_000  # the first orchestrated request of a session loads the encoder

OpenConsole = Callable[[ServerThread], "Console"]


@pytest.fixture(scope="session", autouse=True)
def _patient_expect() -> None:
    """Playwright's ``expect`` waits as long as the pages do: on a loaded machine a
    page may take long to change, and a wait is never a measurement."""
    try:
        from playwright.sync_api import expect
    except ImportError:
        return
    expect.set_options(timeout=WAIT_MS)


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """Debian's chromium (``make test`` installs it with apt), never a downloaded one."""
    executable = shutil.which("chromium")
    if executable is None:
        unavailable("chromium is not installed: apt-get install chromium (make test does)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        unavailable("playwright is not installed: pip install -e '.[dev]'")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable)
        yield browser
        browser.close()


class Console:
    """One browser tab on the console, recording console errors and failed requests."""

    def __init__(self, browser: Any, server: ServerThread, shots: list[Path]) -> None:
        self.context = browser.new_context(viewport={"width": 1280, "height": 860})
        self.page = self.context.new_page()
        self.page.set_default_timeout(WAIT_MS)
        self.server = server
        self.shots = shots
        self._errors: list[str] = []
        self._failed: list[Any] = []
        self.page.on("console", self._on_console)
        self.page.on("pageerror", lambda error: self._errors.append(f"page error: {error}"))
        self.page.on("requestfailed", lambda request: self._failed.append(request))
        self.page.on("response", self._on_response)

    def _on_console(self, message: Any) -> None:
        if message.type == "error":
            self._errors.append(f"console: {message.text}")

    @property
    def errors(self) -> list[str]:
        """Console errors, error responses and failed requests so far."""
        failed = [f"failed: {r.url} ({r.failure})" for r in self._failed if not _read_to_the_end(r)]
        return self._errors + failed

    def _on_response(self, response: Any) -> None:
        if response.status >= 400:
            self._errors.append(f"{response.status}: {response.url}")

    def open(self, key: str = KEY) -> None:
        self.page.goto(f"{self.server.url}/ui")
        self.page.fill("#master-key", key)
        self.page.click("#sign-in button[type=submit]")

    def go(self, route: str) -> None:
        self.page.evaluate("route => { location.hash = route; }", route)

    def shot(self, name: str) -> None:
        # from the top: a page scrolled by a click would show its sticky bar mid-picture
        self.page.evaluate("window.scrollTo(0, 0)")
        for folder in self.shots:
            folder.mkdir(parents=True, exist_ok=True)
            self.page.screenshot(path=str(folder / f"{name}.png"), full_page=True)


def _read_to_the_end(request: Any) -> bool:
    """A stream of events the page read to its end that Chromium still reports as
    aborted, as it may when the response says no-store (microsoft/playwright#42742)."""
    response = request.response()
    return (
        request.failure == "net::ERR_ABORTED"
        and response is not None
        and response.status == 200
        and response.headers.get("content-type", "").startswith("text/event-stream")
    )


@pytest.fixture
def console(chromium: Any, tmp_path: Path) -> Iterator[OpenConsole]:
    shots = [tmp_path / "screenshots"]
    if os.environ.get("CONSOLE_SCREENSHOTS"):
        shots.append(Path(os.environ["CONSOLE_SCREENSHOTS"]))
    opened: list[Console] = []

    def open_on(server: ServerThread) -> Console:
        tab = Console(chromium, server, shots)
        opened.append(tab)
        return tab

    yield open_on
    for tab in opened:
        tab.context.close()


@pytest.fixture
def server(start_proxy: StartProxy, local_tools: LocalTools) -> ServerThread:
    """A proxy behind a master key, with the two queue tools of the local server; stdio
    MCP servers may be added through the API."""
    proxy = start_proxy(
        master_key=KEY,
        admin_key=ADMIN,
        mcp_registry_commands=True,
        planner={"policy": "llm", "top_k": 10, "memory_k": 0},
        executor={"allow_private_networks": True, "retries": 0},
    )
    register(
        proxy,
        [
            http_tool("oslo_queue", "Queue length at the Oslo office", f"{local_tools.url}/sleep"),
            http_tool(
                "bergen_queue", "Queue length at the Bergen office", f"{local_tools.url}/sleep"
            ),
        ],
    )
    return proxy
