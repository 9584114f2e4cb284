"""The console's five things against a real upstream, in Debian's chromium.

    python -m eval.console_real_upstream --upstream http://127.0.0.1:18019/v1 \\
        --model qwen2.5-coder-1.5b [--shots proxy/console/screenshots]

Starts ``toolgraph serve --config FILE`` on a free port (the config is printed: a
routing table with ``--model`` on ``--upstream``, a master and an admin key, the
built-in tools, the demo database pack, the small-model planner options), and a
loopback HTTP tool for the "Add a tool" form. Then, through the console: two
orchestrate chats in the playground and their traces, a catalog search and a tool's
page, a tool added with its test call, and the overview. Each page's screenshot is
saved as ``real-<page>.png``; a JSON summary (answers, traces, times, console errors)
goes to stdout. Two chat requests reach the upstream, nothing else does.

Not part of ``make test``: it needs a served model and minutes of its time.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import httpx
import yaml

from testing.ports import free_port

KEY = "sk-master-console-real"
ADMIN = "sk-admin-console-real"
WAIT_MS = 600_000
QUESTIONS = (
    "Integrate x**2 * exp(-x) from 0 to 5.",
    "How many of the music shop's customers live in Germany?",
)


def config_for(upstream: str, model: str, data_dir: Path) -> dict[str, Any]:
    """The proxy's settings: ``model`` routed to ``upstream``, relayed."""
    return {
        "upstream_base_url": upstream,
        "upstream_api_key": "sk-local-unused",
        "master_key": KEY,
        "admin_key": ADMIN,
        "data_dir": str(data_dir),
        "models": [
            {
                "name": model,
                "litellm_model": f"openai/{model}",
                "base_url": upstream,
                "api": "relay",
            }
        ],
        "packs": {"database": [{"name": "shop", "url": "demo", "description": "a music store"}]},
        "planner": {"triage": True, "pick": "confident", "reflection_rounds": 0},
        "orchestrate": {"preload": True},
        "executor": {"allow_private_networks": True, "call_timeout": 200, "deadline": 480},
        "timeouts": {"request": 600, "upstream_read": 300},
    }


class _Queues(BaseHTTPRequestHandler):
    """GET /queue?label=X: a made-up queue length, for the tool added through the form."""

    def do_GET(self) -> None:
        label = parse_qs(urlparse(self.path).query).get("label", ["?"])[0]
        body = json.dumps({"office": label, "queue_length": 7}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return


@contextmanager
def queue_tool() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Queues)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/queue"
    finally:
        server.shutdown()


@contextmanager
def toolgraph(config: dict[str, Any], folder: Path) -> Iterator[str]:
    """``toolgraph serve --config`` in a process of its own; its URL once loaded."""
    path = folder / "toolgraph.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    print(f"# {path}\n{path.read_text()}", file=sys.stderr)
    port = free_port()
    command = [sys.executable, "-m", "proxy", "serve", "--config", str(path)]
    log = (folder / "toolgraph.log").open("w")
    process = subprocess.Popen([*command, "--port", str(port)], stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(url, process)
        yield url
    finally:
        process.terminate()
        process.wait(30)
        log.close()


def _wait_ready(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"toolgraph exited with {process.returncode}")
        try:
            if httpx.get(f"{url}/readyz", timeout=10).json().get("status") == "ready":
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise SystemExit("toolgraph did not get ready in 15 minutes")


class Tab:
    """One chromium tab on the console, recording console errors and error responses."""

    def __init__(self, browser: Any, url: str, shots: Path) -> None:
        self.page = browser.new_context(viewport={"width": 1280, "height": 860}).new_page()
        self.page.set_default_timeout(WAIT_MS)
        self.url, self.shots, self.errors = url, shots, list[str]()
        self.page.on("console", self._on_console)
        self.page.on("pageerror", lambda error: self.errors.append(f"page error: {error}"))
        self.page.on("response", self._on_response)

    def _on_console(self, message: Any) -> None:
        if message.type == "error":
            self.errors.append(message.text)

    def _on_response(self, response: Any) -> None:
        if response.status >= 400:
            self.errors.append(f"{response.status} {response.url}")

    def go(self, route: str) -> None:
        self.page.evaluate("route => { location.hash = route; }", route)

    def shot(self, name: str) -> None:
        self.shots.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(self.shots / f"real-{name}.png"), full_page=True)


def sign_in(tab: Tab) -> None:
    tab.page.goto(f"{tab.url}/ui")
    tab.page.fill("#master-key", KEY)
    tab.page.click("#sign-in button[type=submit]")
    tab.page.wait_for_selector("#trace-list, #no-traces")


def chat(tab: Tab, model: str, question: str, index: int) -> dict[str, Any]:
    """One orchestrate chat in the playground, then its trace page."""
    tab.go("#/playground")
    tab.page.wait_for_selector("#pg-model")
    tab.page.select_option("#pg-model", model)
    tab.page.select_option("#pg-mode", "orchestrate")
    tab.page.click("text=New chat")  # each question a conversation of its own
    tab.page.fill("#pg-input", question)
    started = time.monotonic()
    tab.page.click("#pg-send")
    done = tab.page.locator(".message.assistant.done")
    done.wait_for()
    seconds = round(time.monotonic() - started, 1)
    result = {
        "question": question,
        "seconds": seconds,
        "progress": tab.page.inner_text("#pg-progress"),
        "answer": done.locator(".content").inner_text(),
    }
    tab.shot(f"playground-{index + 1}")
    link = done.locator(".trace-link")
    if link.count() == 0:
        return result | {"trace": None}
    link.click()
    tab.page.wait_for_selector("#section-calls, #plan-graph")
    tab.page.wait_for_timeout(500)
    tools = tab.page.locator("#plan-graph .plan-node")
    result["trace"] = {
        "url": tab.page.url,
        "plan_tools": [tools.nth(i).get_attribute("data-tool") for i in range(tools.count())],
        "calls": tab.page.locator("#section-calls details.call").count(),
    }
    tab.shot(f"trace-{index + 1}")
    return result


def add_tool(tab: Tab, tool_url: str) -> dict[str, Any]:
    spec = {
        "name": "tromso_queue",
        "description": "Queue length at the Tromso office",
        "parameters": {
            "type": "object",
            "properties": {"label": {"type": "string", "description": "The office."}},
            "required": ["label"],
        },
        "x-endpoint": {"method": "GET", "url": tool_url},
    }
    tab.go("#/add")
    tab.page.fill("#admin-key", ADMIN)
    tab.page.fill("#tool-spec", json.dumps([spec]))
    tab.page.fill("#tool-test-args", '{"tromso_queue": {"label": "tromso"}}')
    tab.page.click("#tool-check")
    tab.page.wait_for_selector("#tool-result li[data-tool=tromso_queue] .badge")
    checked = tab.page.inner_text("#tool-result")
    tab.shot("add-tool")
    tab.page.click("#tool-save")
    tab.page.wait_for_selector("#tool-result li[data-tool=tromso_queue] a")
    return {"checked": checked}


def catalog(tab: Tab) -> dict[str, Any]:
    tab.go("#/catalog?q=queue%20length%20at%20the%20Tromso%20office")
    tab.page.wait_for_selector("#search-results [data-method=hybrid] li")
    first = tab.page.inner_text("#search-results [data-method=hybrid] li:first-child")
    tab.shot("catalog")
    tab.page.click("#search-results [data-method=hybrid] li:first-child a")
    tab.page.wait_for_selector("h1 code")
    tab.shot("tool")
    return {"first_hybrid": first, "tool_page": tab.page.inner_text("h1 code")}


def overview(tab: Tab) -> dict[str, Any]:
    tab.go("#/overview")
    tab.page.wait_for_selector("#overview .tile")
    tab.page.wait_for_timeout(1000)
    tab.shot("overview")
    tab.go("#/traces")
    tab.page.wait_for_selector("#trace-list tbody tr")
    tab.shot("traces")
    return {"traces": tab.page.locator("#trace-list tbody tr").count()}


def drive(url: str, model: str, tool_url: str, shots: Path) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    executable = shutil.which("chromium")
    if executable is None:
        raise SystemExit("chromium is not installed: apt-get install chromium")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable)
        tab = Tab(browser, url, shots)
        sign_in(tab)
        summary: dict[str, Any] = {"chats": []}
        for index, question in enumerate(QUESTIONS):
            summary["chats"].append(chat(tab, model, question, index))
        summary["add_tool"] = add_tool(tab, tool_url)
        summary["catalog"] = catalog(tab)
        summary["overview"] = overview(tab)
        summary["console_errors"] = tab.errors
        browser.close()
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eval.console_real_upstream")
    parser.add_argument("--upstream", required=True, help="OpenAI-compatible base URL")
    parser.add_argument("--model", required=True, help="the upstream's model name")
    parser.add_argument("--shots", type=Path, default=Path("proxy/console/screenshots"))
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop toolgraph too
    with tempfile.TemporaryDirectory(prefix="toolgraph-console-") as name:
        folder = Path(name)
        config = config_for(args.upstream, args.model, folder / "data")
        with queue_tool() as tool_url, toolgraph(config, folder) as url:
            summary = drive(url, args.model, tool_url, args.shots)
        summary |= {"model": args.model, "upstream": args.upstream}
        summary["date"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        print(json.dumps(summary, indent=2))
        print((folder / "toolgraph.log").read_text()[-4000:], file=sys.stderr)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
