"""Virtual keys end to end: created and revoked through the admin API and the CLI, used
through the official SDK and an MCP client, each a tenant with its own tool scope and
limits; the master key stays the operator's."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import httpx2
import openai
import pytest
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client

from proxy.cli import main
from proxy.execute.plan import PlanNode
from proxy.execute.scheduler import CallRecord, Outcome, PlanRun
from proxy.plan.model import Plan, SubTask
from proxy.plan.policy import embed_subtasks
from proxy.tenancy.keys import VirtualKey
from testing.brain import Brain
from testing.fake_upstream import FakeUpstream
from tests.conftest import ServerThread, StartProxy, closed_after_test
from tests.orchestrate.conftest import ORCHESTRATE, user
from tests.tenancy.conftest import KEY_A, UPSTREAM_KEY

MASTER = KEY_A
ADMIN = "sk-admin-0123456789"
KEYS = "/v1/toolgraph/keys"


@pytest.fixture
def proxy(start_proxy: StartProxy) -> ServerThread:
    return start_proxy(
        master_key=MASTER, admin_key=ADMIN, upstream_api_key=UPSTREAM_KEY,
        planner={"policy": "graph"},
    )  # fmt: skip


def bearer(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


def create(server: ServerThread, **spec: Any) -> dict[str, Any]:
    response = httpx.post(f"{server.url}{KEYS}", json=spec, headers=bearer(ADMIN), timeout=30)
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


def sdk(server: ServerThread, key: str) -> openai.OpenAI:
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key=key, max_retries=0, timeout=300)
    return closed_after_test(client)


def traces(server: ServerThread, key: str) -> list[str]:
    response = httpx.get(f"{server.url}/v1/toolgraph/traces", headers=bearer(key), timeout=30)
    assert response.status_code == 200, response.text
    return [summary["id"] for summary in response.json()["data"]]


def test_keys_are_managed_with_the_admin_key_alone(proxy: ServerThread) -> None:
    url = f"{proxy.url}{KEYS}"
    for key in (MASTER, "sk-someone"):
        refused = httpx.post(url, json={"name": "x"}, headers=bearer(key), timeout=30)
        assert refused.status_code == 401
    created = create(proxy, name="analytics", limits={"requests_per_minute": 60})
    secret = created.pop("key")
    listed = httpx.get(url, headers=bearer(ADMIN), timeout=30).json()["data"]
    assert listed == [created]  # the same record, never the secret nor its digest
    assert secret not in json.dumps(listed)
    assert "digest" not in listed[0]
    assert created["hint"] == secret[-4:]
    # the admin key manages keys, it is no client key
    with pytest.raises(openai.AuthenticationError):
        sdk(proxy, ADMIN).models.list()
    bad = httpx.post(url, json={"name": "a/b"}, headers=bearer(ADMIN), timeout=30)
    assert (bad.status_code, bad.json()["error"]["param"]) == (400, "name")
    zero = {"name": "z", "limits": {"max_concurrent": 0}}
    bad = httpx.post(url, json=zero, headers=bearer(ADMIN), timeout=30)
    assert (bad.status_code, bad.json()["error"]["code"]) == (400, "invalid_key")
    unknown = httpx.delete(f"{url}/vk_nothing", headers=bearer(ADMIN), timeout=30)
    assert (unknown.status_code, unknown.json()["error"]["code"]) == (404, "key_not_found")


def test_a_virtual_key_is_a_client_and_a_tenant_of_its_own(
    proxy: ServerThread, upstream: FakeUpstream, brain: Brain
) -> None:
    first, second = create(proxy, name="first"), create(proxy, name="second")
    brain.arguments["2*pi"] = {"expression": "2*pi*50"}
    raw = sdk(proxy, first["key"]).chat.completions.with_raw_response.create(
        model="fake-model", messages=user("Evaluate the expression 2*pi*50 numerically."),
        extra_body=ORCHESTRATE,
    )  # fmt: skip
    trace_id = raw.headers["x-toolgraph-trace-id"]
    # the upstream gets the proxy's own key, never a virtual one
    assert {r.headers.get("authorization") for r in upstream.requests} == {f"Bearer {UPSTREAM_KEY}"}

    assert traces(proxy, first["key"]) == [trace_id]
    assert traces(proxy, second["key"]) == []
    assert traces(proxy, MASTER) == []  # the operator's tenant is its own too
    revoked = httpx.delete(f"{proxy.url}{KEYS}/{first['id']}", headers=bearer(ADMIN), timeout=30)
    assert revoked.json() == {"id": first["id"], "object": "virtual_key.deleted", "deleted": True}
    with pytest.raises(openai.AuthenticationError):
        sdk(proxy, first["key"]).models.list()
    assert len(sdk(proxy, second["key"]).models.list().data) > 0


def exhaust(client: openai.OpenAI, requests: int) -> None:
    for _ in range(requests):
        client.models.list()


def test_a_keys_rate_limit_is_openais_429_with_retry_after(proxy: ServerThread) -> None:
    limited = create(proxy, name="limited", limits={"requests_per_minute": 2})
    client = sdk(proxy, limited["key"])
    # at most 2 a minute: of 5 quick requests (two minutes at most), one is refused
    with pytest.raises(openai.RateLimitError) as refused:
        exhaust(client, 5)
    assert refused.value.code == "rate_limit_exceeded"
    assert isinstance(refused.value.body, dict)
    assert refused.value.body["type"] == "requests"
    assert 1 <= int(refused.value.response.headers["retry-after"]) <= 60
    assert len(sdk(proxy, MASTER).models.list().data) > 0  # the master key has no limit


@contextlib.asynccontextmanager
async def mcp_client(server: ServerThread, key: str) -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(headers=bearer(key), timeout=httpx2.Timeout(300.0)) as http,
        Client(streamable_http_client(f"{server.url}/mcp", http_client=http), cache=None) as mcp,
    ):
        yield mcp


def text_of(result: types.CallToolResult) -> str:
    (block,) = result.content
    assert isinstance(block, types.TextContent)
    return block.text


async def test_a_keys_tool_scope_holds_on_mcp(proxy: ServerThread) -> None:
    scoped = create(proxy, name="calculator", scope={"tools": ["evaluate_*"]})
    search = {"query": "cross product of two vectors", "k": 5}
    async with mcp_client(proxy, scoped["key"]) as client:
        found = await client.call_tool("search_tools", search)
        refused = await client.call_tool(
            "call_tool", {"name": "vector_operation", "arguments": {"operation": "cross"}}
        )
        allowed = await client.call_tool(
            "call_tool", {"name": "evaluate_expression", "arguments": {"expression": "6*7"}}
        )
    names = [hit["name"] for hit in json.loads(text_of(found))]
    assert names
    assert all(name.startswith("evaluate_") for name in names)
    assert refused.is_error
    assert "no tool 'vector_operation'" in text_of(refused)
    assert json.loads(text_of(allowed))["value"] == 42
    async with mcp_client(proxy, MASTER) as client:
        everything = await client.call_tool("search_tools", search)
    assert "vector_operation" in [hit["name"] for hit in json.loads(text_of(everything))]


def orchestrated(server: ServerThread, key: str, text: str) -> dict[str, Any]:
    """The trace of ``text`` orchestrated with ``key``."""
    raw = sdk(server, key).chat.completions.with_raw_response.create(
        model="fake-model", messages=user(text), extra_body=ORCHESTRATE
    )
    trace_id = raw.headers["x-toolgraph-trace-id"]
    url = f"{server.url}/v1/toolgraph/traces/{trace_id}"
    found: dict[str, Any] = httpx.get(url, headers=bearer(key), timeout=30).json()
    return found


def candidates(trace: dict[str, Any]) -> set[str]:
    return {c["tool"] for d in trace["plan"]["decisions"] for c in d["candidates"]}


def test_a_key_scoped_to_no_tool_plans_none(proxy: ServerThread, brain: Brain) -> None:
    nothing = create(proxy, name="no tools", scope={"tools": []})
    brain.arguments["2*pi"] = {"expression": "2*pi*50"}
    found = orchestrated(proxy, nothing["key"], "Evaluate the expression 2*pi*50 numerically.")
    assert candidates(found) == set()
    assert found["calls"] == []


CROSS = "Compute the cross product of two vectors, [1, 2, 3] and [4, 5, 6]."


@pytest.mark.parametrize("policy", ["llm", "graph"])
def test_a_keys_tool_scope_bounds_the_planners_candidates(
    start_proxy: StartProxy, upstream: FakeUpstream, brain: Brain, policy: str
) -> None:
    """The planner never shows the model, nor plans, a tool outside the key's scope (nor
    the categories of those alone): the same request from the master key is offered
    ``vector_operation``."""
    proxy = start_proxy(
        master_key=MASTER, admin_key=ADMIN, upstream_api_key=UPSTREAM_KEY,
        planner={"policy": policy},
    )  # fmt: skip
    arguments = {"operation": "cross", "a": [1, 2, 3], "b": [4, 5, 6]}
    brain.one_step(CROSS, "cross product", "vector_operation", arguments)
    calculator = create(proxy, name="calculator", scope={"tools": ["evaluate_*"]})

    everything = orchestrated(proxy, MASTER, CROSS)
    assert "vector_operation" in candidates(everything)
    if policy == "llm":
        assert any("vector_operation" in text for stage, text in brain.prompts if stage == "pick")
        assert "physics" in decompose_prompts(upstream)

    brain.prompts.clear()
    upstream.requests.clear()
    scoped = orchestrated(proxy, calculator["key"], CROSS)
    offered = candidates(scoped)
    assert offered
    assert all(tool.startswith("evaluate_") for tool in offered), offered
    assert all(call["tool"].startswith("evaluate_") for call in scoped["calls"])
    assert not any("vector_operation" in text for _, text in brain.prompts)
    if policy == "llm":
        shown = decompose_prompts(upstream)
        assert "math" in shown
        assert "physics" not in shown  # no tool of the key's is a physics one


def decompose_prompts(upstream: FakeUpstream) -> str:
    """The system prompts of the decompositions the upstream was asked for."""
    systems = [
        str(request.body["messages"][0].get("content"))
        for request in upstream.requests
        if request.body.get("messages")
    ]
    return "\n".join(text for text in systems if text.startswith("You plan how to answer"))


def test_the_cli_creates_lists_and_revokes_keys(
    proxy: ServerThread, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLGRAPH_ADMIN_KEY", ADMIN)
    where = ("--proxy", proxy.url)
    assert main(["keys", "create", "ci", "--tools", "evaluate_*", "--rpm", "5", *where]) == 0
    line, secret = capfd.readouterr().out.strip().splitlines()
    key_id = line.split()[0]
    assert line.split()[1:] == [
        "ci",
        f"…{secret[-4:]}",
        "tools=evaluate_*",
        "requests_per_minute=5",
    ]
    assert len(sdk(proxy, secret).models.list().data) > 0
    assert main(["keys", "list", *where]) == 0
    assert capfd.readouterr().out.strip() == line
    assert main(["keys", "revoke", key_id, *where]) == 0
    assert capfd.readouterr().out.strip() == f"{key_id}: revoked"
    with pytest.raises(openai.AuthenticationError):
        sdk(proxy, secret).models.list()
    assert main(["keys", "revoke", key_id, *where]) == 1
    assert capfd.readouterr().err.strip() == f"toolgraph keys: no virtual key {key_id!r}"


def remember_paths(server: ServerThread, tenant: str, paths: dict[str, list[str]]) -> None:
    """Leave ``paths`` (a sub-task's text: the tools of its chain) in ``tenant``'s plan
    memory, as its earlier runs did, through the server's own memory and encoder."""

    async def remember() -> None:
        assert server.services is not None
        catalog = await server.services.orchestrator.catalog.get()
        assert catalog.memory is not None
        for text, tools in paths.items():
            ids = [f"s{n}" for n in range(len(tools))]
            subtasks = [SubTask(id=i, text=text, needs=ids[n - 1 : n]) for n, i in enumerate(ids)]
            plan = Plan(subtasks, dict(zip(ids, tools, strict=True)), "llm")
            nodes = [PlanNode(id=i, tool=tool) for i, tool in zip(ids, tools, strict=True)]
            run = PlanRun({node.id: CallRecord(node, Outcome.OK) for node in nodes})
            vectors = embed_subtasks(catalog.planner.encoder, subtasks)
            await catalog.memory.remember(plan, run, {ids[-1]: vectors[ids[-1]]}, tenant)

    assert server.loop is not None
    asyncio.run_coroutine_threadsafe(remember(), server.loop).result(timeout=120)


def test_a_scoped_keys_memory_examples_name_only_its_tools(
    start_proxy: StartProxy, brain: Brain
) -> None:
    """Paths the key's tenant remembers through tools it no longer reaches (a narrowed
    scope, a tool moved to another source) are not shown to the model; its others are."""
    proxy = start_proxy(
        master_key=MASTER, admin_key=ADMIN, upstream_api_key=UPSTREAM_KEY,
        planner={"policy": "llm", "memory_k": 5},
    )  # fmt: skip
    arguments = {"operation": "cross", "a": [1, 2, 3], "b": [4, 5, 6]}
    brain.one_step(CROSS, "cross product", "vector_operation", arguments)
    calculator = create(proxy, name="calculator", scope={"tools": ["evaluate_*"]})
    orchestrated(proxy, MASTER, CROSS)  # the catalog loaded
    fields = {k: v for k, v in calculator.items() if k not in ("object", "key")}
    tenant = VirtualKey(**fields, digest="").tenant
    remember_paths(
        proxy,
        tenant,
        {
            "Take the cross product of [1, 2, 3] and [4, 5, 6]": ["vector_operation"],
            "Evaluate 3*4, then cross two vectors": ["evaluate_expression", "vector_operation"],
            "Evaluate the expression 2*pi*50": ["evaluate_expression"],
        },
    )

    brain.prompts.clear()
    orchestrated(proxy, calculator["key"], CROSS)
    picks = [text for stage, text in brain.prompts if stage == "pick"]
    assert picks
    assert all("A past success" in text for text in picks)  # its own path is shown
    assert not any("vector_operation" in text for _, text in brain.prompts)
