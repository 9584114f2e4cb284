"""Adding an MCP server from the console's form, in a real browser, against a real proxy
and a small server written with the official SDK (tests/console/weather_mcp.py): its
tools listed before anything is saved, every failure said in words, then added."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ServerThread, StartProxy
from tests.console.conftest import KEY, Console, OpenConsole
from tests.console.weather_mcp import KEY as WEATHER_KEY
from tests.orchestrate.conftest import ADMIN

ROOT = Path(__file__).resolve().parents[2]
CHECK = "/v1/toolgraph/mcp/servers?dry_run=true"

pytestmark = pytest.mark.timeout(600)


@pytest.fixture
def server(start_proxy: StartProxy) -> ServerThread:
    return start_proxy(
        master_key=KEY,
        admin_key=ADMIN,
        mcp_registry_commands=True,
        executor={"allow_private_networks": True},
    )


@pytest.fixture
def weather_url() -> Iterator[str]:
    """The weather server over streamable HTTP; its URL once it listens."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.console.weather_mcp", "--http"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    out = process.stdout
    assert out is not None
    try:
        port = out.readline().strip()  # printed once it listens
        assert port.isdigit(), "the weather server did not start"
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)
        out.close()


def add_page(tab: Console) -> None:
    tab.open()
    tab.page.wait_for_selector("#trace-list, #no-traces")
    tab.go("#/add")
    tab.page.fill("#admin-key", ADMIN)


def check_fails(tab: Console, words: str) -> None:
    tab.page.click("#mcp-check")
    tab.page.wait_for_selector("#mcp-result .error")
    assert words in tab.page.inner_text("#mcp-result .error")
    assert tab.page.is_disabled("#mcp-save")


def check_lists_the_weather_tools(tab: Console) -> None:
    tab.page.click("#mcp-check")
    tab.page.wait_for_selector("#mcp-tools li[data-tool=weather_sunrise]")
    listed = tab.page.locator("#mcp-tools li")
    tools = [listed.nth(i).get_attribute("data-tool") for i in range(listed.count())]
    assert sorted(tools) == ["weather_forecast", "weather_sunrise"]
    assert "Tomorrow's weather forecast for a city" in tab.page.inner_text(
        "#mcp-tools li[data-tool=weather_forecast]"
    )
    assert tab.page.is_enabled("#mcp-save")
    assert "null" not in tab.page.inner_text("#mcp-result")


def save_and_open_a_tool(tab: Console) -> None:
    tab.page.click("#mcp-save")
    tab.page.wait_for_selector("#mcp-result .saved")
    assert "connected" in tab.page.inner_text("#mcp-result .saved")
    assert "2 tools in the catalog" in tab.page.inner_text("#mcp-result")
    tab.page.click("#mcp-saved a:text('weather_forecast')")
    tab.page.wait_for_selector("h1 code")
    assert tab.page.inner_text("h1 code") == "weather_forecast"
    facts = tab.page.inner_text(".facts")
    assert "mcp · forecast" in facts
    assert "mcp://weather/forecast" in facts


def only_the_refused_checks(tab: Console, count: int) -> None:
    """No error in the page but the ``count`` checks the proxy answered 502 (and the
    browser's own line for each)."""
    answered = [f"502: {tab.server.url}{CHECK}"] * count
    assert [e for e in tab.errors if e.startswith("502: ")] == answered
    assert all(e.startswith("502: ") or "status of 502" in e for e in tab.errors)


def test_a_stdio_server_is_checked_listed_then_added(
    console: OpenConsole, server: ServerThread
) -> None:
    tab = console(server)
    add_page(tab)
    # wrong in the form: said before anything is sent
    check_fails(tab, "Name: 1 to 32 letters")
    tab.page.fill("#mcp-name", "weather")
    check_fails(tab, "Command line: give the command")
    tab.page.fill("#mcp-command", "python3 'unclosed")
    check_fails(tab, "a ' quote is not closed")
    # wrong on the proxy's host: said in words
    tab.page.fill("#mcp-command", "/nonexistent/weather-server --stdio")
    check_fails(tab, "cannot start '/nonexistent/weather-server' (no such file)")
    tab.page.fill("#mcp-command", f'"{sys.executable}" -c "import sys; sys.exit(\'no config\')"')
    check_fails(tab, "closed the connection before it answered initialize; it wrote: no config")

    tab.page.fill("#mcp-command", f'"{sys.executable}" -m tests.console.weather_mcp')
    tab.page.fill("#mcp-env", f"PYTHONPATH={ROOT}\nWEATHER_UNITS=metric")
    tab.page.fill("#mcp-cwd", str(ROOT))
    check_lists_the_weather_tools(tab)
    tab.shot("add-mcp-server")
    tab.page.fill("#mcp-cwd", "/")  # any change asks for a new check
    assert tab.page.is_disabled("#mcp-save")
    tab.page.fill("#mcp-cwd", str(ROOT))
    check_lists_the_weather_tools(tab)
    save_and_open_a_tool(tab)
    only_the_refused_checks(tab, 2)


def test_an_http_server_is_checked_with_its_headers_then_added(
    weather_url: str, console: OpenConsole, server: ServerThread
) -> None:
    tab = console(server)
    add_page(tab)
    tab.page.fill("#mcp-name", "weather")
    tab.page.select_option("#mcp-transport", "http")
    assert tab.page.is_hidden("#mcp-command")
    tab.page.fill("#mcp-url", "weather.example.com/mcp")
    check_fails(tab, "URL: give the server's http:// or https:// endpoint")
    tab.page.fill("#mcp-url", weather_url)
    tab.page.fill("#mcp-headers", f"Authorization Bearer {WEATHER_KEY}")
    check_fails(tab, "Headers, line 1: write it as NAME: value")
    tab.page.fill("#mcp-headers", "")
    check_fails(tab, f"{weather_url} answered HTTP 401")
    tab.page.fill("#mcp-headers", f"Authorization: Bearer {WEATHER_KEY}")
    check_lists_the_weather_tools(tab)
    save_and_open_a_tool(tab)
    only_the_refused_checks(tab, 1)
