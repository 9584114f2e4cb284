"""Invocation against real HTTP tool services on loopback, and the egress policy."""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import AsyncIterator

import pytest
from pydantic import JsonValue

from graph_store.models import Endpoint, ParamLocation, Provenance, Tool
from proxy.config import ExecutorSettings, ToolCredentialSettings
from proxy.errors import EgressDenied, ToolError, ToolInputRejected, ToolResponseTooLarge
from proxy.execute.egress import EgressPolicy, is_public
from proxy.execute.invocation import HttpInvoker, Invoker, make_http_client
from proxy.execute.plan import PlanNode, ToolPlan
from proxy.execute.runner import CatalogRunner
from proxy.execute.scheduler import Outcome, Scheduler
from proxy.tools.builtin import PythonTools
from tests.conftest import free_port
from tests.execute.tool_server import ToolServer, serve_tools

SECRET = "sk-tool-secret-abcdef123456"
LOOPBACK = EgressPolicy(["127.0.0.1"], allow_private=True)


def http_tool(name: str, url: str, method: str = "GET", **locations: ParamLocation) -> Tool:
    return Tool(
        id=f"test/{name}",
        name=name,
        original_name=name,
        endpoint=Endpoint(method=method, url=url, locations=locations),
        provenance=Provenance(format="test"),
    )


def executor(**overrides: object) -> ExecutorSettings:
    values: dict[str, object] = {"retry_backoff": 0.01, "call_timeout": 5.0}
    values.update(overrides)
    return ExecutorSettings.model_validate(values)


@pytest.fixture
async def tools_server() -> AsyncIterator[ToolServer]:
    async with serve_tools() as server:
        yield server


@pytest.fixture
def secret_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOTEL_API_KEY", SECRET)


async def invoke(
    tool: Tool,
    arguments: dict[str, JsonValue],
    policy: EgressPolicy = LOOPBACK,
    **settings: object,
) -> JsonValue:
    config = executor(**settings)
    async with make_http_client(policy, config) as client:
        return await HttpInvoker(client, config).invoke(tool, arguments)


async def test_arguments_go_where_the_endpoint_puts_them(
    tools_server: ToolServer, secret_env: None
) -> None:
    tool = http_tool(
        "get_hotel",
        f"{tools_server.url}/hotels/{{hotel_id}}",
        lang=ParamLocation.QUERY,
        x_trace=ParamLocation.HEADER,
        session=ParamLocation.COOKIE,
    )
    credential = ToolCredentialSettings(host="127.0.0.1", env="HOTEL_API_KEY", header="x-api-key")
    output = await invoke(
        tool,
        {"hotel_id": "a/b c", "lang": "en", "x_trace": "t1", "session": "s1", "guests": 2},
        credentials=[credential],
    )
    seen = tools_server.last
    assert seen["path"] == "/hotels/a%2Fb%20c"
    assert seen["match"] == {"hotel_id": "a/b c"}
    assert seen["query"] == {"lang": "en", "guests": "2"}
    headers = seen["headers"]
    assert isinstance(headers, dict)
    assert headers["x_trace"] == "t1"
    assert headers["x-api-key"] == SECRET
    assert seen["cookies"] == {"session": "s1"}
    assert SECRET not in str(output)


async def test_a_post_sends_a_json_body(tools_server: ToolServer) -> None:
    tool = http_tool("book", f"{tools_server.url}/echo", "POST", dry_run=ParamLocation.QUERY)
    output = await invoke(tool, {"guest": {"name": "Ada"}, "nights": 3, "dry_run": True})
    assert output == {
        "path": "/echo",
        "query": {"dry_run": "true"},
        "body": {"guest": {"name": "Ada"}, "nights": 3},
    }


async def test_a_credential_never_shows_in_an_error(
    tools_server: ToolServer, secret_env: None
) -> None:
    tool = http_tool("leaky", f"{tools_server.url}/leaky")
    credential = ToolCredentialSettings(host="127.0.0.1", env="HOTEL_API_KEY", header="x-api-key")
    with pytest.raises(ToolError) as raised:
        await invoke(tool, {}, credentials=[credential])
    assert "HTTP 401" in raised.value.message
    assert SECRET not in raised.value.message
    assert SECRET[:6] not in raised.value.message


@pytest.mark.parametrize("status", [429, 503])
async def test_idempotent_calls_are_retried(tools_server: ToolServer, status: int) -> None:
    tool = http_tool("flaky", f"{tools_server.url}/flaky/{status}")
    assert await invoke(tool, {}, retries=2) == {"ok": True, "attempt": 3}


async def test_a_post_is_not_retried(tools_server: ToolServer) -> None:
    tool = http_tool("flaky_post", f"{tools_server.url}/flaky/503", "POST")
    with pytest.raises(ToolError, match="HTTP 503"):
        await invoke(tool, {}, retries=2)
    assert tools_server.hits["/flaky/503"] == 1


async def test_retries_run_out(tools_server: ToolServer) -> None:
    tool = http_tool("flaky", f"{tools_server.url}/flaky/500")
    with pytest.raises(ToolError, match="HTTP 500"):
        await invoke(tool, {}, retries=1)
    assert tools_server.hits["/flaky/500"] == 2


async def test_a_response_over_the_cap_fails(tools_server: ToolServer) -> None:
    tool = http_tool("big", f"{tools_server.url}/big")
    assert await invoke(tool, {"size": 1000}, max_response_bytes=1000) == "x" * 1000
    with pytest.raises(ToolResponseTooLarge):
        await invoke(tool, {"size": 5000}, max_response_bytes=1000)


@pytest.mark.parametrize("value", ["..", "."])
async def test_a_path_parameter_cannot_walk_the_path(tools_server: ToolServer, value: str) -> None:
    tool = http_tool("get_hotel", f"{tools_server.url}/hotels/{{hotel_id}}")
    with pytest.raises(ToolInputRejected):
        await invoke(tool, {"hotel_id": value})


async def test_a_missing_path_parameter_is_refused(tools_server: ToolServer) -> None:
    tool = http_tool("get_hotel", f"{tools_server.url}/hotels/{{hotel_id}}")
    with pytest.raises(ToolInputRejected, match="hotel_id"):
        await invoke(tool, {})


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:{port}/echo",
        "http://localhost:{port}/echo",
        "http://169.254.169.254/latest/meta-data/iam/security-credentials/",
        "http://[::1]:{port}/echo",
        "http://[::ffff:127.0.0.1]:{port}/echo",
        "http://10.0.0.1/internal",
        "http://0.0.0.0:{port}/echo",
        "http://[64:ff9b::7f00:1]:{port}/echo",
        "http://[2002:7f00:1::1]:{port}/echo",
        "http://[::127.0.0.1]:{port}/echo",
        "http://[::ffff:0:a9fe:a9fe]/latest/meta-data/",
    ],
)
async def test_the_default_policy_refuses_ssrf(tools_server: ToolServer, url: str) -> None:
    port = tools_server.url.rsplit(":", 1)[1]
    tool = http_tool("ssrf", url.format(port=port))
    with pytest.raises(EgressDenied, match="non-public address"):
        await invoke(tool, {}, EgressPolicy.from_settings(ExecutorSettings()))
    assert tools_server.hits["/echo"] == 0  # refused before any connection attempt


async def test_a_redirect_to_a_forbidden_host_is_refused(tools_server: ToolServer) -> None:
    # The service is allowed; where it redirects to is not.
    target = "http://169.254.169.254/latest/meta-data/"
    tool = http_tool("jump", f"{tools_server.url}/redirect")
    with pytest.raises(EgressDenied, match=r"169\.254\.169\.254"):
        await invoke(tool, {"to": target})
    other = tools_server.url.replace("127.0.0.1", "localhost") + "/echo"
    with pytest.raises(EgressDenied, match="allow-list"):
        await invoke(tool, {"to": other})
    assert tools_server.hits["/echo"] == 0


async def test_a_redirect_within_the_allow_list_is_followed(tools_server: ToolServer) -> None:
    tool = http_tool("jump", f"{tools_server.url}/redirect")
    output = await invoke(tool, {"to": f"{tools_server.url}/echo?from=redirect"})
    assert output == {"path": "/echo", "query": {"from": "redirect"}, "body": None}


async def test_every_resolved_address_is_checked() -> None:
    # A name with one public and one private address (a rebinding set-up) is refused.
    async def resolver(host: str, port: int) -> list[str]:
        return ["93.184.215.14", "127.0.0.1"]

    policy = EgressPolicy(resolver=resolver)
    with pytest.raises(EgressDenied, match=r"127\.0\.0\.1"):
        await policy.addresses("rebind.example", 80)

    async def public(host: str, port: int) -> list[str]:
        return ["93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"]

    assert len(await EgressPolicy(resolver=public).addresses("example.com", 443)) == 2


# Each carries a private IPv4 address that a NAT64 translator, a 6to4, Teredo or
# ISATAP tunnel, or a dual stack would deliver to.
EMBEDDING_PRIVATE_IPV4 = [
    "64:ff9b::a9fe:a9fe",  # NAT64 well-known prefix: 169.254.169.254
    "64:ff9b::10.0.0.1",
    "64:ff9b:1::a00:1",  # NAT64 local-use prefix (RFC 8215)
    "64:ff9b:1:a00:1::",  # … with the IPv4 address at its /48 position
    "2002:a00:1::1",  # 6to4: 10.0.0.1
    "2002:c0a8:101:1::1",  # 6to4: 192.168.1.1
    "::10.0.0.1",  # IPv4-compatible
    "::127.0.0.1",
    "::ffff:0:10.0.0.1",  # IPv4-translated (SIIT)
    "2001:0:4136:e378:8000:63bf:f5ff:fffe",  # Teredo client 10.0.0.1
    "2001:0:a00:1::1",  # Teredo server 10.0.0.1
    "2606:4700::200:5efe:a00:1",  # ISATAP identifier in a global prefix: 10.0.0.1
    "2606:4700::5efe:c0a8:101",
    "::ffff:127.0.0.1",  # IPv4-mapped
]


@pytest.mark.parametrize("address", EMBEDDING_PRIVATE_IPV4)
async def test_an_ipv6_address_carrying_a_private_ipv4_is_refused(address: str) -> None:
    assert not is_public(ipaddress.ip_address(address))
    with pytest.raises(EgressDenied, match="non-public address"):
        EgressPolicy().check_host(f"[{address}]")

    async def dns64(host: str, port: int) -> list[str]:
        return [address]

    with pytest.raises(EgressDenied, match="non-public address"):
        await EgressPolicy(resolver=dns64).addresses("internal.example", 80)
    EgressPolicy(allow_private=True).check_host(address)


@pytest.mark.parametrize(
    "address",
    ["64:ff9b::808:808", "2002:808:808::1", "::ffff:8.8.8.8", "2606:4700::200:5efe:808:808"],
)
def test_an_ipv6_address_carrying_a_public_ipv4_stays_public(address: str) -> None:
    assert is_public(ipaddress.ip_address(address))


def test_the_allow_list_matches_names_and_wildcards() -> None:
    policy = EgressPolicy(["api.example.com", "*.rapidapi.com"])
    policy.check_host("api.example.com")
    policy.check_host("hotels.p.rapidapi.com")
    policy.check_host("API.Example.com.")
    for host in ("example.com", "evilrapidapi.com", "api.example.com.evil.net"):
        with pytest.raises(EgressDenied):
            policy.check_host(host)


async def test_python_and_http_tools_run_through_one_interface(tools_server: ToolServer) -> None:
    async def add(arguments: object) -> JsonValue:
        assert isinstance(arguments, dict)
        return {"sum": arguments["a"] + arguments["b"]}

    adder = Tool(
        id="builtin/add",
        name="add",
        original_name="add",
        endpoint=Endpoint(method="POST", url="builtin:add"),
        provenance=Provenance(format="builtin"),
    )
    echo = http_tool("echo", f"{tools_server.url}/echo")
    config = executor()
    async with make_http_client(LOOPBACK, config) as client:
        invoker = Invoker(HttpInvoker(client, config), PythonTools({"add": add}))
        runner = CatalogRunner({"add": adder, "echo": echo}, invoker)
        assert runner.host(PlanNode(id="e", tool="echo")) == "127.0.0.1"
        assert runner.host(PlanNode(id="a", tool="add")) == "local"
        plan = ToolPlan(
            nodes=(
                PlanNode(id="a", tool="add", arguments={"a": 2, "b": 3}),
                PlanNode(id="e", tool="echo", arguments={"q": "x"}),
                PlanNode(id="m", tool="missing"),
            )
        )
        run = await Scheduler(config).execute(plan, runner)
    assert run.records["a"].output == {"sum": 5}
    assert run.records["e"].output == {"path": "/echo", "query": {"q": "x"}, "body": None}
    assert run.records["m"].outcome is Outcome.FAILED
    assert run.records["m"].error == "no tool named missing in the catalog"


async def test_a_query_credential_reaches_the_service_only(
    tools_server: ToolServer, secret_env: None
) -> None:
    tool = http_tool("echo", f"{tools_server.url}/echo")
    credential = ToolCredentialSettings(host="127.0.0.1", env="HOTEL_API_KEY", query="key")
    output = await invoke(tool, {"q": "x", "key": "the model's guess"}, credentials=[credential])
    assert tools_server.last["query"] == {"q": "x", "key": SECRET}
    # the service echoed the key back: what the proxy keeps of the answer masks it
    assert output == {"path": "/echo", "query": {"q": "x", "key": "***"}, "body": None}


async def test_connection_errors_are_retried_for_idempotent_calls() -> None:
    accepted = 0

    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal accepted
        accepted += 1
        writer.transport.abort()  # reset before any answer

    server = await asyncio.start_server(hang_up, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        with pytest.raises(ToolError, match="cannot reach gone"):
            await invoke(http_tool("gone", f"http://127.0.0.1:{port}/x"), {}, retries=2)
        assert accepted == 3
        with pytest.raises(ToolError, match="cannot reach gone"):
            await invoke(http_tool("gone", f"http://127.0.0.1:{port}/x", "POST"), {}, retries=2)
        assert accepted == 4  # a POST is tried once
    finally:
        server.close()
        await server.wait_closed()
    refused = http_tool("refused", f"http://127.0.0.1:{free_port()}/x")
    with pytest.raises(ToolError, match="cannot reach refused: ConnectError"):
        await invoke(refused, {}, retries=1)


async def test_a_redirect_to_another_origin_carries_no_credential(
    tools_server: ToolServer, secret_env: None
) -> None:
    # localhost is another origin than 127.0.0.1, though the same server: the key stays home
    policy = EgressPolicy(["127.0.0.1", "localhost"], allow_private=True)
    tool = http_tool("jump", f"{tools_server.url}/redirect")
    credential = ToolCredentialSettings(host="127.0.0.1", env="HOTEL_API_KEY", header="x-api-key")
    elsewhere = tools_server.url.replace("127.0.0.1", "localhost") + "/echo"
    await invoke(tool, {"to": elsewhere}, policy, credentials=[credential])
    assert tools_server.last["path"] == "/echo"
    headers = tools_server.last["headers"]
    assert isinstance(headers, dict)
    assert "x-api-key" not in headers
    await invoke(tool, {"to": f"{tools_server.url}/echo"}, policy, credentials=[credential])
    home = tools_server.last["headers"]
    assert isinstance(home, dict)
    assert home["x-api-key"] == SECRET  # a redirect within the origin keeps it


async def test_a_fixed_query_string_is_kept_beside_the_arguments(tools_server: ToolServer) -> None:
    tool = http_tool("echo", f"{tools_server.url}/echo?api-version=2024-10-21&format=json")
    output = await invoke(tool, {"q": "x"})
    assert output == {
        "path": "/echo",
        "query": {"api-version": "2024-10-21", "format": "json", "q": "x"},
        "body": None,
    }
