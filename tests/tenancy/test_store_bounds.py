"""The shared stores are bounded per tenant and by bytes: one client filling its share
of the ``Idempotency-Key``s, the traces, the turn results, the stored Responses or select
mode's loaded tools takes nothing from another's; a trace list reads summaries, not the traces; a Response's input is kept
once."""

from __future__ import annotations

import uuid

import openai
import pytest
from pydantic import JsonValue

from proxy.config import OrchestrateSettings
from proxy.kv import Bound, KeyValue, MemoryKeyValue
from proxy.orchestrate.conversation import ConversationResults, EarlierCall
from proxy.orchestrate.records import Stores
from proxy.orchestrate.traces import TraceStore
from proxy.select.loaded import LoadedTool, LoadedTools, tool_digest
from retriever.config import RetrieverConfig
from testing.brain import Brain
from tests.conftest import ServerThread, StartProxy, closed_after_test
from tests.orchestrate.conftest import ORCHESTRATE, user
from tests.tenancy.conftest import KEY_A, KEY_B, UPSTREAM_KEY


def sdk(server: ServerThread, key: str) -> openai.OpenAI:
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key=key, max_retries=0, timeout=300)
    return closed_after_test(client)


def keyed(server: ServerThread, key: str, idempotency_key: str) -> str:
    """An orchestrated request sent with ``idempotency_key``; its answer's text."""
    reply = sdk(server, key).chat.completions.create(
        model="fake-model",
        messages=user("Evaluate the expression 2*pi*50 numerically."),
        extra_body=ORCHESTRATE,
        extra_headers={"Idempotency-Key": idempotency_key},
    )
    return reply.choices[0].message.content or ""


def test_one_client_filling_its_idempotency_keys_leaves_room_for_another(
    start_proxy: StartProxy, brain: Brain
) -> None:
    brain.arguments["2*pi"] = {"expression": "2*pi*50"}
    # room for three keys in all; one client's share holds one or two (a key with its
    # answer is some 1.5 KB), so that it is refused while the store still has room
    proxy = start_proxy(
        planner={"policy": "graph"},
        upstream_api_key=UPSTREAM_KEY,
        orchestrate={"max_idempotency_keys": 3, "tenant_idempotency_bytes": 2048},
    )
    refused = None
    for _ in range(3):
        try:
            keyed(proxy, KEY_A, uuid.uuid4().hex)
        except openai.RateLimitError as exc:
            refused = exc
            break
    assert refused is not None, "one client took every key of the store"
    assert refused.code == "idempotency_keys_full"
    assert refused.response.headers["retry-after"] == "60"

    theirs = uuid.uuid4().hex
    answer = keyed(proxy, KEY_B, theirs)
    assert keyed(proxy, KEY_B, theirs) == answer  # kept: the retry is a replay


def trace(trace_id: str, output_bytes: int) -> dict[str, JsonValue]:
    """A trace as a turn leaves it, with one call that returned ``output_bytes``."""
    call: dict[str, JsonValue] = {"node": "n1", "tool": "t", "outcome": "ok"}
    return {
        "id": trace_id,
        "conversation": "user: hello",
        "answer": {"kind": "answer"},
        "calls": [call | {"output": "x" * output_bytes}],
        "timings": {"total": 0.5},
    }


def traces_of(**options: int) -> tuple[TraceStore, KeyValue]:
    stores = Stores.open(None, OrchestrateSettings.model_validate(options))
    return TraceStore(stores.traces, 60, ()), stores.traces


async def test_one_clients_traces_push_out_its_own_old_ones_never_anothers() -> None:
    traces, _ = traces_of(tenant_trace_bytes=3 * 1024 * 1024)
    await traces.put("b", "b1", trace("b1", 1024 * 1024))
    for n in range(5):
        await traces.put("a", f"a{n}", trace(f"a{n}", 1024 * 1024))
    assert await traces.get("b", "b1") is not None
    assert await traces.get("a", "a0") is None
    assert await traces.get("a", "a4") is not None
    assert [s["id"] for s in await traces.summaries("b", 10)] == ["b1"]


async def test_all_traces_together_are_bounded_by_bytes() -> None:
    traces, store = traces_of(max_trace_bytes=4 * 1024 * 1024)
    for n in range(10):
        await traces.put(f"tenant-{n}", "t", trace("t", 1024 * 1024))
    assert isinstance(store, MemoryKeyValue)
    assert len(store) < 10  # of 20 entries: 10 traces and their summaries


class CountingReads:
    """A KeyValue seam that counts the bytes read through ``newest``."""

    def __init__(self, store: KeyValue) -> None:
        self.store = store
        self.read = 0

    async def get(self, key: str) -> bytes | None:
        return await self.store.get(key)

    async def put(self, key: str, value: bytes, ttl: int, *, tenant: str = "") -> None:
        await self.store.put(key, value, ttl, tenant=tenant)

    async def add(self, key: str, value: bytes, ttl: int, *, tenant: str = "") -> bool:
        return await self.store.add(key, value, ttl, tenant=tenant)

    async def delete(self, key: str) -> None:
        await self.store.delete(key)

    async def newest(self, limit: int, prefix: str = "") -> list[tuple[str, bytes]]:
        found = await self.store.newest(limit, prefix)
        self.read += sum(len(value) for _, value in found)
        return found


async def test_a_trace_list_reads_summaries_not_the_traces() -> None:
    counting = CountingReads(MemoryKeyValue(Bound("traces", 100, 4 * 1024 * 1024)))
    traces = TraceStore(counting, 60, ())
    for n in range(20):
        await traces.put("a", f"t{n}", trace(f"t{n}", 1024 * 1024))
    summaries = await traces.summaries("a", 50)
    assert [s["id"] for s in summaries] == [f"t{n}" for n in reversed(range(20))]
    assert (summaries[0]["tools"], summaries[0]["outcome"]) == (["t"], "answer")
    assert counting.read < 20 * 1024  # the traces themselves are 20 MiB


@pytest.fixture
def responding(start_proxy: StartProxy) -> ServerThread:
    """Stored responses of up to 500 KB each; one tenant's 700 KB together."""
    return start_proxy(
        upstream_api_key=UPSTREAM_KEY,
        responses={"max_stored_bytes": 500_000, "tenant_bytes": 700_000},
    )


def test_a_stored_response_keeps_its_input_once(responding: ServerThread) -> None:
    client = sdk(responding, KEY_A)
    # 196 KB, echoed in the answer: with the input kept twice, past the 500 KB bound
    text = "pebble " * 28_000
    first = client.responses.create(model="gpt-x", input=text)
    second = client.responses.create(model="gpt-x", previous_response_id=first.id, input="again")
    assert second.output_text == "You said: again"
    items = client.responses.input_items.list(second.id, order="asc").data
    assert [item.model_dump()["content"][0]["text"] for item in items] == [
        text,
        f"You said: {text}",
        "again",
    ]


def test_one_clients_responses_push_out_its_own_old_ones_never_anothers(
    responding: ServerThread,
) -> None:
    # each response keeps its input and the answer that echoes it: 100 KB, 200 KB
    theirs = sdk(responding, KEY_B).responses.create(model="gpt-x", input="b " * 25_000)
    mine = sdk(responding, KEY_A)
    made = [mine.responses.create(model="gpt-x", input=f"{n} " * 50_000).id for n in range(4)]
    with pytest.raises(openai.NotFoundError):
        mine.responses.retrieve(made[0])
    assert mine.responses.retrieve(made[-1]).id == made[-1]
    assert sdk(responding, KEY_B).responses.retrieve(theirs.id).id == theirs.id


async def test_one_clients_turn_results_push_out_its_own_never_anothers() -> None:
    stores = Stores.open(
        None, OrchestrateSettings.model_validate({"tenant_conversation_bytes": 3 * 1024 * 1024})
    )
    results = ConversationResults(stores.results, 60, limit=16)
    big = "x" * (1024 * 1024)

    def turn(n: int) -> list[dict[str, JsonValue]]:
        return [{"role": "user", "content": f"question {n}"}]

    def answered(n: int) -> list[dict[str, JsonValue]]:
        return [*turn(n), {"role": "assistant", "content": "done"}]

    call = EarlierCall("t", {}, big, "text")
    await results.remember(turn(0), "done", "b", [call])
    for n in range(1, 6):
        await results.remember(turn(n), "done", "a", [call])
    assert await results.earlier(answered(0), "b")
    assert not await results.earlier(answered(1), "a")
    assert await results.earlier(answered(5), "a")


def loaded_tools(n: int) -> list[LoadedTool]:
    """A conversation's loaded tools, about 100 KB."""
    function: dict[str, JsonValue] = {"name": f"t{n}", "description": "x" * 100_000}
    spec: dict[str, JsonValue] = {"type": "function", "function": function}
    return [LoadedTool(f"t{n}", tool_digest(spec), spec)]


async def test_one_clients_loaded_tools_push_out_its_own_never_anothers() -> None:
    config = RetrieverConfig.model_validate({"select_loaded_tenant_bytes": 350_000})
    loaded = LoadedTools.open(None, config)
    await loaded.put("b0", loaded_tools(0), "b")
    for n in range(1, 6):
        await loaded.put(f"a{n}", loaded_tools(n), "a")
    assert await loaded.get("b0") == loaded_tools(0)
    assert await loaded.get("a1") == []  # its own oldest went
    assert await loaded.get("a5") == loaded_tools(5)


async def test_all_loaded_tools_together_are_bounded_by_bytes() -> None:
    config = RetrieverConfig.model_validate({"select_loaded_max_bytes": 350_000})
    loaded = LoadedTools.open(None, config)
    for n in range(10):
        await loaded.put(f"c{n}", loaded_tools(n), f"tenant-{n}")
    kept = [n for n in range(10) if await loaded.get(f"c{n}")]
    assert kept == [7, 8, 9]
