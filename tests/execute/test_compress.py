"""Compression: truncation, field selection, and the field list an LLM chooses once per tool."""

from __future__ import annotations

import asyncio
import json

import pytest
from pydantic import JsonValue
from redis.asyncio import Redis

from graph_store.models import Provenance, Tool
from proxy import metrics
from proxy.execute.compress import Compressor, field_paths, known_paths, select_fields, truncate
from proxy.execute.fields import (
    FieldSelector,
    RuleFieldChooser,
    parse_keep,
    rule_based_fields,
)
from proxy.execute.service import FIELD_LISTS
from proxy.kv import MemoryKeyValue, RedisKeyValue
from proxy.llm import UpstreamModel
from testing.fake_upstream import FakeUpstream, Script

HOTELS: JsonValue = {
    "meta": {"version": "2.3.1", "request_id": "r-77", "generated_at": "2026-11-22T03:00:00Z"},
    "results": [
        {
            "id": f"h{i}",
            "name": f"Hotel {i}",
            "price": 100 + i,
            "thumbnail": f"https://cdn.example/{i}.jpg" * 3,
            "tracking": {"campaign": "x" * 40, "pixel": "y" * 40},
        }
        for i in range(12)
    ],
}
KEEP = ["results[].id", "results[].name", "results[].price"]


def hotel_tool(description: str = "Find hotels in a city.") -> Tool:
    return Tool(
        id="test/search_hotels",
        name="search_hotels",
        original_name="search_hotels",
        description=description,
        provenance=Provenance(format="test"),
    )


def test_truncation_keeps_head_and_tail_within_the_limit() -> None:
    text = "".join(chr(ord("a") + i % 26) for i in range(5000))
    cut = truncate(text, 1024)
    assert len(cut) <= 1024
    assert cut == truncate(text, 1024)  # deterministic
    head, _, rest = cut.partition(" …[")
    count, _, tail = rest.partition(" chars cut]… ")
    assert text.startswith(head)
    assert text.endswith(tail)
    assert len(head) + int(count) + len(tail) == len(text)
    assert len(head) > len(tail) > 0
    assert truncate("short", 1024) == "short"


def test_fields_are_paths_through_objects_and_lists() -> None:
    assert field_paths(HOTELS)[:4] == [
        "meta.version",
        "meta.request_id",
        "meta.generated_at",
        "results[].id",
    ]
    assert field_paths([{"a": {"b": [1, 2]}}, {"c": None}]) == ["[].a.b[]", "[].c"]
    kept = select_fields(HOTELS, KEEP)
    assert isinstance(kept, dict)
    assert list(kept) == ["results"]
    assert kept["results"][0] == {"id": "h0", "name": "Hotel 0", "price": 100}  # type: ignore[index,call-overload]
    assert select_fields(HOTELS, ["meta"]) == {"meta": HOTELS["meta"]}  # type: ignore[index,call-overload]
    assert select_fields(HOTELS, ["nothing.here"]) == {}
    assert select_fields([{"a": 1, "b": 2}, {"b": 3}], ["[].a"]) == [{"a": 1}]


def test_only_paths_of_the_example_are_accepted() -> None:
    available = field_paths(HOTELS)
    assert known_paths(
        ["results[].name", "results", "results[].stars", "meta.version"], available
    ) == [
        "results[].name",
        "results",
        "meta.version",
    ]


@pytest.mark.parametrize(
    ("reply", "keep"),
    [
        ('{"keep": ["a", "b.c"]}', ["a", "b.c"]),
        ('Sure!\n```json\n{"keep": ["a"]}\n```', ["a"]),
        ('{"keep": "a"}', []),
        ("I cannot decide.", []),
        ('{"keep": ["a", 3]}', ["a"]),
    ],
)
def test_the_reply_is_parsed_leniently(reply: str, keep: list[str]) -> None:
    assert parse_keep(reply) == keep


def keep_reply(paths: list[str], delay: float = 0.0) -> Script:
    return Script(text=json.dumps({"keep": paths}), delay=delay)


async def test_the_llm_chooses_fields_once_per_tool(
    upstream: FakeUpstream, model: UpstreamModel
) -> None:
    upstream.enqueue(keep_reply([*KEEP, "results[].invented"]))
    compressor = Compressor(1024, FieldSelector(MemoryKeyValue(FIELD_LISTS)))
    raw_before = metrics.TOOL_RESPONSE_BYTES.labels("raw")._value.get()
    first = await compressor.compress(hotel_tool(), HOTELS, model)
    assert first.method == "fields"
    assert first.fields == tuple(KEEP)
    assert json.loads(first.text)["results"][11] == {"id": "h11", "name": "Hotel 11", "price": 111}
    assert first.ratio < 0.3
    asked = upstream.requests[0].body
    prompt = "\n".join(m["content"] for m in asked["messages"])
    assert "search_hotels" in prompt
    assert "Find hotels in a city." in prompt
    assert "results[].thumbnail" in prompt
    assert asked["temperature"] == 0
    second = await compressor.compress(hotel_tool(), HOTELS, model)
    assert second == first
    assert len(upstream.requests) == 1  # cached
    changed = await compressor.compress(hotel_tool("Find hotels, now with prices."), HOTELS, model)
    assert changed.method == "truncate"  # a new description is a new key; the queue is empty
    assert len(upstream.requests) == 2
    assert metrics.TOOL_RESPONSE_BYTES.labels("raw")._value.get() - raw_before == 3 * len(
        json.dumps(HOTELS, separators=(",", ":"))
    )


async def test_concurrent_first_calls_share_one_llm_call(
    upstream: FakeUpstream, model: UpstreamModel
) -> None:
    upstream.enqueue(keep_reply(KEEP, delay=0.2))
    compressor = Compressor(1024, FieldSelector(MemoryKeyValue(FIELD_LISTS)))
    results = await asyncio.gather(
        *(compressor.compress(hotel_tool(), HOTELS, model) for _ in range(5))
    )
    assert {r.method for r in results} == {"fields"}
    assert len(upstream.requests) == 1


@pytest.mark.parametrize(
    "script",
    [
        Script(text="The fields that matter are the names."),
        Script(text='{"keep": ["no.such.field"]}'),
        Script(status=500),
    ],
)
async def test_a_useless_or_failed_answer_falls_back_to_truncation(
    upstream: FakeUpstream, model: UpstreamModel, script: Script
) -> None:
    upstream.enqueue(script)
    compressor = Compressor(1024, FieldSelector(MemoryKeyValue(FIELD_LISTS)))
    result = await compressor.compress(hotel_tool(), HOTELS, model)
    assert result.method == "truncate"
    assert len(result.text) == 1024
    again = await compressor.compress(hotel_tool(), HOTELS, model)
    assert again.method == "truncate"
    assert len(upstream.requests) == 1  # the failure is remembered for a while


async def test_short_responses_and_long_text_skip_the_llm(
    upstream: FakeUpstream, model: UpstreamModel
) -> None:
    compressor = Compressor(1024, FieldSelector(MemoryKeyValue(FIELD_LISTS)))
    small = await compressor.compress(hotel_tool(), {"ok": True}, model)
    assert (small.text, small.method) == ('{"ok":true}', "none")
    text = await compressor.compress(hotel_tool(), "word " * 500, model)
    assert text.method == "truncate"
    assert upstream.requests == []


async def test_fields_then_truncation_when_still_too_long(
    upstream: FakeUpstream, model: UpstreamModel
) -> None:
    upstream.enqueue(keep_reply(["results[].thumbnail"]))
    result = await Compressor(300, FieldSelector(MemoryKeyValue(FIELD_LISTS))).compress(
        hotel_tool(), HOTELS, model
    )
    assert result.method == "fields+truncate"
    assert len(result.text) <= 300
    assert result.text.startswith('{"results":[{"thumbnail":')


async def test_the_field_list_is_shared_through_redis(
    upstream: FakeUpstream, model: UpstreamModel, redis_server: str
) -> None:
    first_pod, second_pod = Redis.from_url(redis_server), Redis.from_url(redis_server)
    try:
        await first_pod.flushdb()
        upstream.enqueue(keep_reply(KEEP))
        one = await Compressor(1024, FieldSelector(RedisKeyValue(first_pod, FIELD_LISTS))).compress(
            hotel_tool(), HOTELS, model
        )
        two = await Compressor(
            1024, FieldSelector(RedisKeyValue(second_pod, FIELD_LISTS))
        ).compress(hotel_tool(), HOTELS, model)
        assert one == two
        assert two.method == "fields"
        assert len(upstream.requests) == 1
        keys = await second_pod.keys("toolgraph:fields:*")
        assert len(keys) == 1
        assert 0 < await second_pod.ttl(keys[0]) <= 7 * 24 * 3600
    finally:
        await first_pod.aclose()
        await second_pod.aclose()


def test_the_llm_free_choice_drops_metadata_like_fields() -> None:
    paths = [
        "meta.version",
        "results[].id",
        "results[].name",
        "results[].thumbnailUrl",
        "results[].createdAt",
        "data.price",
        "status",
        "links.self",
        "pageSize",
    ]
    assert rule_based_fields(paths) == ["results[].id", "results[].name", "data.price"]


async def test_the_llm_free_chooser_compresses_without_a_model() -> None:
    result = await Compressor(1024, RuleFieldChooser()).compress(hotel_tool(), HOTELS)
    assert result.method == "fields"
    assert result.fields == ("results[].id", "results[].name", "results[].price")
