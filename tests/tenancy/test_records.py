"""Two clients of one proxy see only their own records: traces (listed, read, and the
trace of a ``/mcp`` run), and stored Responses, whether toolgraph keeps them or a
Responses-speaking upstream does (relayed under one shared upstream key)."""

from __future__ import annotations

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

from testing.brain import Brain
from testing.fake_upstream import FakeUpstream
from tests.conftest import ServerThread, StartProxy, closed_after_test
from tests.orchestrate.conftest import ORCHESTRATE, user
from tests.tenancy.conftest import KEY_A, KEY_B, UPSTREAM_KEY

SECRET = "tangerine-harbour-42"  # words only A typed


def sdk(server: ServerThread, key: str) -> openai.OpenAI:
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key=key, max_retries=0, timeout=300)
    return closed_after_test(client)


def orchestrate(server: ServerThread, key: str, text: str) -> str:
    raw = sdk(server, key).chat.completions.with_raw_response.create(
        model="fake-model", messages=user(text), extra_body=ORCHESTRATE
    )
    return str(raw.headers["x-toolgraph-trace-id"])


def get(server: ServerThread, key: str, path: str, **query: Any) -> httpx.Response:
    auth = {"authorization": f"Bearer {key}"}
    return httpx.get(f"{server.url}{path}", params=query, headers=auth, timeout=30)


def listed(server: ServerThread, key: str, **query: Any) -> list[str]:
    response = get(server, key, "/v1/toolgraph/traces", **query)
    assert response.status_code == 200, response.text
    return [summary["id"] for summary in response.json()["data"]]


@pytest.fixture
def proxy(start_proxy: StartProxy) -> ServerThread:
    """An open proxy (no master key): each client's own key names its tenant."""
    return start_proxy(planner={"policy": "graph"}, upstream_api_key=UPSTREAM_KEY)


def test_a_client_lists_and_reads_only_its_own_traces(proxy: ServerThread, brain: Brain) -> None:
    brain.arguments["2*pi"] = {"expression": "2*pi*50"}
    brain.arguments["3*pi"] = {"expression": "3*pi"}
    mine = orchestrate(proxy, KEY_A, f"Evaluate the expression 2*pi*50 numerically. {SECRET}")
    theirs = orchestrate(proxy, KEY_B, "Evaluate the expression 3*pi numerically.")

    assert listed(proxy, KEY_A) == [mine]
    assert listed(proxy, KEY_B) == [theirs]
    assert SECRET not in get(proxy, KEY_B, "/v1/toolgraph/traces").text
    assert listed(proxy, KEY_B, tool="evaluate_expression") == [theirs]  # filtered, too
    refused = get(proxy, KEY_B, f"/v1/toolgraph/traces/{mine}")
    assert refused.status_code == 404  # unknown, as an id never made: nothing to probe
    assert refused.json()["error"]["code"] == "trace_not_found"
    assert SECRET in get(proxy, KEY_A, f"/v1/toolgraph/traces/{mine}").text


@contextlib.asynccontextmanager
async def mcp_client(server: ServerThread, key: str) -> AsyncIterator[Client]:
    headers = {"authorization": f"Bearer {key}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(300.0)) as http,
        Client(streamable_http_client(f"{server.url}/mcp", http_client=http), cache=None) as mcp,
    ):
        yield mcp


async def test_the_trace_of_a_mcp_run_is_its_clients_alone(
    proxy: ServerThread, brain: Brain
) -> None:
    brain.arguments["2*pi"] = {"expression": "2*pi*50"}
    ask = {"request": f"Evaluate the expression 2*pi*50 numerically. {SECRET}"}
    async with mcp_client(proxy, KEY_A) as client:
        ran = await client.call_tool("run", {**ask, "model": "fake-model"})
    assert not ran.is_error, ran
    (block,) = ran.content
    assert isinstance(block, types.TextContent)
    trace_id = json.loads(block.text)["trace_id"]

    assert get(proxy, KEY_B, f"/v1/toolgraph/traces/{trace_id}").status_code == 404
    assert listed(proxy, KEY_B) == []
    assert listed(proxy, KEY_A) == [trace_id]  # the same tenant on /mcp as on /v1
    assert SECRET in get(proxy, KEY_A, f"/v1/toolgraph/traces/{trace_id}").text


@pytest.fixture
def relaying(start_proxy: StartProxy, upstream: FakeUpstream) -> ServerThread:
    """A proxy that relays /v1/responses to an upstream keeping responses itself."""
    upstream.speaks_responses = True
    return start_proxy(upstream_api_key=UPSTREAM_KEY, upstream_responses="native")


def create(server: ServerThread, key: str, stream: bool) -> str:
    client = sdk(server, key)
    if not stream:
        return client.responses.create(model="gpt-x", input=SECRET).id
    with client.responses.stream(model="gpt-x", input=SECRET) as events:
        return events.get_final_response().id


@pytest.mark.parametrize("stream", [False, True])
def test_a_relayed_response_is_read_listed_and_deleted_by_its_client_alone(
    relaying: ServerThread, upstream: FakeUpstream, stream: bool
) -> None:
    response_id = create(relaying, KEY_A, stream)
    assert response_id.startswith("resp_fake")  # the upstream's own: relayed
    theirs = sdk(relaying, KEY_B)

    with pytest.raises(openai.NotFoundError):
        theirs.responses.retrieve(response_id)
    with pytest.raises(openai.NotFoundError):
        theirs.responses.input_items.list(response_id)
    with pytest.raises(openai.NotFoundError):
        theirs.responses.delete(response_id)
    with pytest.raises(openai.BadRequestError) as continued:
        theirs.responses.create(model="gpt-x", previous_response_id=response_id, input="more")
    assert continued.value.code == "previous_response_not_found"

    mine = sdk(relaying, KEY_A)
    assert SECRET in mine.responses.retrieve(response_id).output_text
    assert mine.responses.input_items.list(response_id).data == []  # the fake keeps none
    mine.responses.delete(response_id)
    assert upstream.stored_responses == {}
    with pytest.raises(openai.NotFoundError):
        mine.responses.retrieve(response_id)


def test_a_relayed_response_continues_for_its_own_client(
    relaying: ServerThread, upstream: FakeUpstream
) -> None:
    first = sdk(relaying, KEY_A).responses.create(model="gpt-x", input="hello")
    second = sdk(relaying, KEY_A).responses.create(
        model="gpt-x", previous_response_id=first.id, input="again"
    )
    assert second.output_text == "You said: again"
    assert upstream.requests[-1].body["previous_response_id"] == first.id
