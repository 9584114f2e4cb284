"""An install without the extras: the core serves passthrough and select, and a setting that
needs an extra that is not installed stops the start in one line.

A module is "not installed" here the way Python's import system allows it to be hidden:
``sys.modules[name] = None`` makes both ``import name`` and ``find_spec(name)`` fail as
they would without the package. The serving test does that in a subprocess for every
module the extras install, so that nothing the core imports on its way to a select
answer can lean on them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from proxy.cli import main
from proxy.config import load_settings
from proxy.extras import missing_extras
from testing.fake_upstream import FakeToolCall, FakeUpstream, Script
from testing.ports import free_port

#: What ``toolgraph[packs]``, ``[providers]`` and ``[gpu]`` install, by import name.
EXTRA_MODULES = (
    "sympy",
    "sqlalchemy",
    "sqlglot",
    "psycopg",
    "pyoxigraph",
    "litellm",
    "FlagEmbedding",
)


@pytest.fixture
def without_extras(monkeypatch: pytest.MonkeyPatch) -> None:
    for module in EXTRA_MODULES:
        monkeypatch.setitem(sys.modules, module, None)


def config(tmp_path: Path, **settings: object) -> str:
    path = tmp_path / "toolgraph.yaml"
    path.write_text(yaml.safe_dump(settings), encoding="utf-8")
    return str(path)


def test_the_default_settings_need_no_extra(without_extras: None) -> None:
    settings = load_settings()
    assert missing_extras(settings) == []
    assert settings.orchestrate.builtin_tools is False  # the math pack needs SymPy


def test_with_the_extras_the_math_pack_is_on_by_default() -> None:
    assert load_settings().orchestrate.builtin_tools is True


def test_a_configured_database_without_the_packs_extra_stops_in_one_line(
    without_extras: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = config(tmp_path, packs={"database": [{"name": "shop", "url": "demo"}]})
    assert main(["catalog", "list", "--config", path]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [
        "toolgraph: packs.database shop needs sqlalchemy, sqlglot, which the [packs] extra "
        "installs: pip install 'toolgraph[packs]'"
    ]


def test_each_setting_names_its_extra(without_extras: None) -> None:
    settings = load_settings(
        packs={
            "database": [{"name": "pg", "url": "postgresql://u@db/shop"}],
            "knowledge_graph": [{"name": "geo", "path": "demo"}],
        },
        models=[{"name": "claude", "litellm_model": "anthropic/claude-x"}],
        orchestrate={"builtin_tools": True},
        retriever={"model_kind": "bge-m3"},
    )
    packs = "which the [packs] extra installs: pip install 'toolgraph[packs]'"
    assert missing_extras(settings) == [
        f"orchestrate.builtin_tools needs sympy, {packs}",
        f"packs.database pg needs sqlalchemy, sqlglot, psycopg, {packs}",
        f"packs.knowledge_graph geo needs pyoxigraph, {packs}",
        "model claude (through litellm) needs litellm, which the [providers] extra installs: "
        "pip install 'toolgraph[providers]'",
        "retriever.model_kind bge-m3 needs FlagEmbedding, which the [gpu] extra installs: "
        "pip install 'toolgraph[gpu]'",
    ]


def test_a_bolt_graph_and_relayed_routes_need_no_extra(without_extras: None) -> None:
    settings = load_settings(
        packs={"knowledge_graph": [{"name": "kg", "kind": "bolt", "url": "bolt://h:7687"}]},
        models=[{"name": "local", "litellm_model": "hosted_vllm/qwen", "base_url": "http://h/v1"}],
    )
    assert missing_extras(settings) == []


#: ``toolgraph serve`` with every extra's modules hidden, as in an install of the core alone.
CORE_ONLY_SERVE = (
    "import sys\n"
    f"for name in {EXTRA_MODULES!r}:\n"
    "    sys.modules[name] = None\n"
    "from proxy.cli import main\n"
    "sys.exit(main())\n"
)


@pytest.fixture
def core_only_proxy(upstream: FakeUpstream, tmp_path: Path) -> Iterator[str]:
    port = free_port()
    log = tmp_path / "serve.log"
    env = {**os.environ, "TOOLGRAPH_UPSTREAM_BASE_URL": upstream.base_url}
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-c", CORE_ONLY_SERVE, "serve", "--port", str(port)],
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(url, process, log)
        yield url
    finally:
        process.terminate()
        process.wait(120)
    assert "Traceback" not in log.read_text(), log.read_text()


def _wait_ready(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        assert process.poll() is None, f"toolgraph exited: {log.read_text()}"
        try:
            if httpx.get(f"{url}/readyz", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"toolgraph was not ready within 300 s: {log.read_text()}")


def weather_tool(name: str, description: str) -> dict[str, object]:
    parameters = {"type": "object", "properties": {"city": {"type": "string"}}}
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


@pytest.mark.slow  # a `toolgraph serve` subprocess that loads the embedding model
@pytest.mark.timeout(600)
def test_the_core_alone_serves_passthrough_and_select(
    core_only_proxy: str, upstream: FakeUpstream
) -> None:
    ping = {"model": "m", "messages": [{"role": "user", "content": "ping"}]}
    answer = httpx.post(f"{core_only_proxy}/v1/chat/completions", json=ping, timeout=30)
    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["message"]["content"] == "You said: ping"

    tools = [
        weather_tool("get_weather_forecast", "The weather forecast for a city: rain, snow."),
        weather_tool("book_hotel_room", "Book a hotel room in a city for some nights."),
        weather_tool("convert_currency", "Convert an amount between two currencies."),
    ]
    upstream.enqueue(Script(tool_calls=(FakeToolCall("get_weather_forecast", "{}"),)))
    select = {
        "model": "m",
        "messages": [{"role": "user", "content": "Will it snow in Oslo on Friday?"}],
        "tools": tools,
        "toolgraph": {"mode": "select", "top_k": 1},
    }
    answer = httpx.post(f"{core_only_proxy}/v1/chat/completions", json=select, timeout=120)
    assert answer.status_code == 200, answer.text
    forwarded = [tool["function"]["name"] for tool in upstream.requests[-1].body["tools"]]
    assert forwarded == ["get_weather_forecast"]
