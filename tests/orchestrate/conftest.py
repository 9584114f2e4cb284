"""Orchestrate mode's fixtures: a fake LLM that answers each of the proxy's prompts
by what it asks, local HTTP tools on loopback, and the SDK."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import openai
import pytest
from aiohttp import web

from testing.brain import Brain
from testing.fake_upstream import FakeUpstream
from tests.conftest import ServerThread, closed_after_test

ORCHESTRATE: dict[str, Any] = {"toolgraph": {"mode": "orchestrate"}}
PROGRESS: dict[str, Any] = {"toolgraph": {"mode": "orchestrate", "progress": True}}
BIG_BALANCE = 123456789012345678901234567890
#: The key :func:`sdk` sends: a trace is read back under it (traces are its tenant's).
CLIENT_KEY = "sk-client"
CLIENT_AUTH = {"authorization": f"Bearer {CLIENT_KEY}"}


@pytest.fixture(autouse=True)
def _no_gate(monkeypatch: pytest.MonkeyPatch) -> None:
    """The no-tool gate off: these tests script artificial requests ("Records?", "Oslo
    queue?") that a gate fitted on real ones may send straight to the answer. The gate
    has its own tests (test_gate.py), which turn it on."""
    monkeypatch.setenv("TOOLGRAPH_ORCHESTRATE__GATE", "false")


@pytest.fixture
def brain(upstream: FakeUpstream) -> Brain:
    brain = Brain()
    upstream.responder = brain
    return brain


def sdk(server: ServerThread, timeout: float = 300, max_retries: int = 0) -> openai.OpenAI:
    """An SDK client for ``server``, closed when the test ends (its pooled sockets too).
    ``timeout``: the first orchestrated request of a session may load the encoder and
    index the catalog, over 60 s at load 15."""
    client = openai.OpenAI(
        base_url=f"{server.url}/v1",
        api_key=CLIENT_KEY,
        max_retries=max_retries,
        timeout=timeout,
    )
    return closed_after_test(client)


def user(text: str) -> list[Any]:
    return [{"role": "user", "content": text}]


def trace(server: ServerThread, trace_id: str) -> dict[str, Any]:
    response = read_trace(server, trace_id)
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


def read_trace(server: ServerThread, trace_id: str) -> httpx.Response:
    """``GET`` a trace with :func:`sdk`'s key, whose tenant made it."""
    url = f"{server.url}/v1/toolgraph/traces/{trace_id}"
    return httpx.get(url, headers=CLIENT_AUTH, timeout=10)


def orchestrated(server: ServerThread, text: str) -> tuple[str, dict[str, Any]]:
    """Orchestrate ``text`` (not streamed): the answer and the request's trace."""
    raw = sdk(server).chat.completions.with_raw_response.create(
        model="fake-model", messages=user(text), extra_body=ORCHESTRATE
    )
    answer = raw.parse().choices[0].message.content or ""
    return answer, trace(server, raw.headers["x-toolgraph-trace-id"])


def only_call(server: ServerThread, messages: list[Any]) -> dict[str, Any]:
    """Orchestrate ``messages`` (not streamed); the one call the request's trace holds."""
    raw = sdk(server).chat.completions.with_raw_response.create(
        model="fake-model", messages=messages, extra_body=ORCHESTRATE
    )
    (call,) = trace(server, raw.headers["x-toolgraph-trace-id"])["calls"]
    found: dict[str, Any] = call
    return found


@dataclass
class LocalTools:
    """HTTP tools on loopback: a slow one, a failing one, one that never answers, one
    whose answer holds an integer past 64 bits."""

    url: str = ""
    hits: Counter[str] = field(default_factory=Counter)
    gone: int = 0  # requests whose client went away before the answer


@pytest.fixture
def local_tools() -> Iterator[LocalTools]:
    """The tools' server runs in a thread of its own, so that blocking SDK calls in a
    test do not stop it."""
    tools = LocalTools()
    loop = asyncio.new_event_loop()
    started = threading.Event()
    runner: list[web.AppRunner] = []

    async def sleep(request: web.Request) -> web.Response:
        tools.hits["sleep"] += 1
        seconds = float(request.query.get("seconds", "0"))
        await asyncio.sleep(seconds)
        return web.json_response({"slept": seconds, "label": request.query.get("label", "")})

    async def echo(request: web.Request) -> web.Response:
        tools.hits["echo"] += 1
        return web.json_response(
            {"query": dict(request.query), "api_key": request.headers.get("x-api-key", "")}
        )

    async def broken(request: web.Request) -> web.Response:
        tools.hits["broken"] += 1
        return web.json_response({"error": "the database is down"}, status=500)

    async def balance(request: web.Request) -> web.Response:
        tools.hits["balance"] += 1  # an integer past 64 bits, as a bank's API may send
        label = json.dumps(request.query.get("label"))
        body = f'{{"account": {label}, "balance": {BIG_BALANCE}}}'
        return web.Response(text=body, content_type="application/json")

    async def hang(request: web.Request) -> web.Response:
        tools.hits["hang"] += 1
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            tools.gone += 1
            raise
        return web.json_response({})

    async def start() -> None:
        app = web.Application()
        app.router.add_get("/sleep", sleep)
        app.router.add_get("/broken", broken)
        app.router.add_get("/echo", echo)
        app.router.add_get("/hang", hang)
        app.router.add_get("/balance", balance)
        runner.append(web.AppRunner(app, handler_cancellation=True))
        await runner[0].setup()
        site = web.TCPSite(runner[0], "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert isinstance(server, asyncio.Server)
        tools.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        started.set()

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(start(), loop).result(10)
    assert started.is_set()
    yield tools
    asyncio.run_coroutine_threadsafe(runner[0].cleanup(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()


def stream_parts(stream: Iterator[Any]) -> tuple[str, str, list[Any]]:
    """(content, reasoning, chunks) of a streamed answer."""
    content, reasoning, chunks = [], [], []
    for chunk in stream:
        chunks.append(chunk)
        for choice in chunk.choices:
            extra = choice.delta.model_extra or {}
            if extra.get("reasoning_content"):
                reasoning.append(extra["reasoning_content"])
            if choice.delta.content:
                content.append(choice.delta.content)
    return "".join(content), "".join(reasoning), chunks


ADMIN = "tg-admin-key-0123456789"


def http_tool(name: str, description: str, url: str) -> dict[str, Any]:
    """An OpenAI function spec served over HTTP GET at ``url`` (query parameters)."""
    return {
        "name": name,
        "description": description,
        "parameters": {
            "type": "object",
            "properties": {
                "label": {"type": "string", "description": "What to look up."},
                "seconds": {"type": "number", "description": "How long the lookup takes."},
            },
            "required": ["label"],
        },
        "x-endpoint": {"method": "GET", "url": url},
    }


def register(server: ServerThread, specs: list[dict[str, Any]]) -> None:
    """Add tools through the registry API (each one test-called before it is stored)."""
    response = httpx.post(
        f"{server.url}/v1/toolgraph/tools",
        json={"openai": specs},
        headers={"authorization": f"Bearer {ADMIN}"},
        timeout=30,
    )
    assert response.status_code == 201, response.text


def seed_catalog(specs: list[dict[str, Any]]) -> None:
    """Write tools straight into the data dir's graph store, as `toolgraph graph import`
    does: no test call, so the egress policy meets them only when they run."""
    from pathlib import Path

    from graph_store.embedded import InProcessStore
    from graph_store.ingest.openai_spec import parse_openai

    parsed = parse_openai(Path("seeded.json"), {"tools": specs})
    assert not parsed.errors, parsed.errors
    store = InProcessStore.open(Path(os.environ["TOOLGRAPH_DATA_DIR"]) / "graph")
    store.upsert_tools(parsed.tools)
    store.close()
