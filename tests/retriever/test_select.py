"""Select mode's ranking, trimming and checks, on the real model (no HTTP)."""

from __future__ import annotations

from typing import Any

import pytest

from retriever.batching import BatchingEmbedder
from retriever.cache import LRUCache
from retriever.config import RetrieverConfig
from retriever.conversation import conversation_query
from retriever.embedder import Encoder
from retriever.errors import InvalidTools
from retriever.select import SelectOptions, ToolSelector, check_tools
from tests.retriever.client_tools import COUNTRIES, client_tools, visa_tool

OPTIONS = SelectOptions(top_k=5, threshold=0.2)


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


@pytest.fixture(scope="module")
def selector(encoder: Encoder) -> ToolSelector:
    # One cache for the module: the 300 tools are embedded once, as in a running proxy.
    embedder = BatchingEmbedder(encoder, LRUCache(10_000), window_ms=0)
    return ToolSelector(embedder, RetrieverConfig(enum_top_k=4, enum_min_values=8))


async def test_the_right_tool_is_among_the_few_kept(selector: ToolSelector) -> None:
    selection = await selector.select(
        client_tools(), [user("Will it rain in Paris tomorrow?")], OPTIONS
    )
    assert selection.offered == 300
    assert 1 <= len(selection.tools) <= 5
    assert selection.kept[0] == "get_weather_forecast"
    # Forwarded tools keep the client's order and are the client's own objects.
    names = [t["function"]["name"] for t in selection.tools]
    assert names == [n for n in (t["function"]["name"] for t in client_tools()) if n in names]


async def test_a_follow_up_still_finds_the_tool_of_the_earlier_turn(selector: ToolSelector) -> None:
    messages = [
        user("What's the weather forecast in Lisbon today?"),
        {"role": "assistant", "content": "Sunny, 24 degrees."},
        user("and what about tomorrow?"),
    ]
    selection = await selector.select(client_tools(), messages, OPTIONS)
    assert "get_weather_forecast" in selection.kept[:3]


async def test_ranked_as_the_catalog_a_request_finds_the_tool_its_words_name(
    selector: ToolSelector,
) -> None:
    """Ten actions on ten things ("Please share the music playlist number 4411."): the
    cosine alone mixes the actions up, the catalog's fusion with BM25 reads them."""
    tools = client_tools()
    asked = [t["function"] for t in tools[10:110]]  # ten verbs on each of ten nouns
    requests = [
        "Please {} the {} number 4411.".format(*f["description"][:-1].split(" a ", 1))
        for f in asked
    ]
    embedder = selector._embedder
    dense = ToolSelector(embedder, RetrieverConfig(select_fusion=False))
    fused = ToolSelector(embedder, RetrieverConfig())  # the default
    first: dict[str, int] = {"dense": 0, "fused": 0}
    for function, text in zip(asked, requests, strict=True):
        for arm, ranker in (("dense", dense), ("fused", fused)):
            selection = await ranker.select(tools, [user(text)], OPTIONS)
            first[arm] += selection.kept[0] == function["name"]
    assert first["fused"] >= 94, first
    assert first["fused"] >= first["dense"] + 10, first


def test_the_query_is_the_recent_user_turns_newest_first() -> None:
    messages = [
        {"role": "system", "content": "be brief"},
        user("one"),
        {"role": "assistant", "content": "ok"},
        user("two"),
        {"role": "user", "content": [{"type": "text", "text": "three"}, {"type": "image_url"}]},
    ]
    assert conversation_query(messages, 2) == "three\ntwo"
    assert conversation_query(messages[:1], 3) == "be brief"


async def test_never_zero_tools(selector: ToolSelector) -> None:
    strict = SelectOptions(top_k=5, threshold=0.99, min_tools=2)
    selection = await selector.select(client_tools(), [user("zebra tango")], strict)
    assert len(selection.tools) == 2


async def test_a_tool_named_by_tool_choice_is_kept(selector: ToolSelector) -> None:
    choice = {"type": "function", "function": {"name": "archive_podcast_episode"}}
    selection = await selector.select(
        client_tools(), [user("Will it rain in Paris tomorrow?")], OPTIONS, choice
    )
    assert "archive_podcast_episode" in selection.kept
    with pytest.raises(InvalidTools, match="not in tools") as info:
        await selector.select(
            client_tools(),
            [user("hi")],
            OPTIONS,
            {"type": "function", "function": {"name": "nope"}},
        )
    assert info.value.param == "tool_choice"


async def test_long_enums_are_cut_to_valid_near_values(selector: ToolSelector) -> None:
    tools = [*client_tools()[:20], visa_tool()]
    selection = await selector.select(
        tools, [user("Do I need a visa for a holiday in Japan?")], OPTIONS
    )
    visa = next(t for t in selection.tools if t["function"]["name"] == "check_visa_rules")
    country = visa["function"]["parameters"]["properties"]["country"]
    assert "Japan" in country["enum"]  # named in the conversation
    assert "Austria" in country["enum"]  # the default stays valid
    assert len(country["enum"]) <= 4 + 2
    assert set(country["enum"]) <= set(COUNTRIES)
    assert country["type"] == "string"
    assert visa["function"]["parameters"]["required"] == ["country"]
    # Short enums are left whole, and the client's tool object is not modified.
    assert visa["function"]["parameters"]["properties"]["purpose"]["enum"] == [
        "tourism",
        "business",
    ]
    assert len(visa_tool()["function"]["parameters"]["properties"]["country"]["enum"]) == 32
    assert selection.trimmed_enums == 1


async def test_the_same_tools_next_turn_are_not_embedded_again(selector: ToolSelector) -> None:
    embedder = selector._embedder
    await selector.select(client_tools(), [user("book a flight to Rome")], OPTIONS)
    encoded = embedder.stats.encoded
    await selector.select(client_tools(), [user("and a hotel room there")], OPTIONS)
    assert embedder.stats.encoded == encoded + 1  # the new query only


async def test_tools_of_other_types_pass_through(selector: ToolSelector) -> None:
    other = {"type": "web_search"}
    selection = await selector.select([*client_tools()[:10], other], [user("search")], OPTIONS)
    assert other in selection.tools


def _tool(name: str, parameters: Any = None) -> dict[str, Any]:
    function: dict[str, Any] = {"name": name}
    if parameters is not None:
        function["parameters"] = parameters
    return {"type": "function", "function": function}


@pytest.mark.parametrize(
    ("tools", "param", "message"),
    [
        ([_tool("a"), _tool("a")], "tools.[1].function.name", "both named 'a'"),
        ([_tool("a b")], "tools.[0].function.name", "1-64 characters"),
        ([{"type": "function"}], "tools.[0].function", "no function object"),
        ([_tool("a", "object")], "tools.[0].function.parameters", "JSON Schema object"),
        ([_tool("a", {"type": "array"})], "tools.[0].function.parameters", "type 'object'"),
        ([_tool("a", {"properties": []})], "tools.[0].function.parameters", "'properties'"),
        ([_tool("a", {"required": "x"})], "tools.[0].function.parameters", "'required'"),
        (
            [_tool("a", {"properties": {"x": {"enum": []}}})],
            "tools.[0].function.parameters",
            "non-empty",
        ),
        (["a"], "tools.[0]", "must be an object"),
    ],
)
def test_bad_tools_are_named(tools: list[Any], param: str, message: str) -> None:
    with pytest.raises(InvalidTools, match=message) as info:
        check_tools(tools)
    assert info.value.param == param


async def test_a_long_enum_beside_a_deeply_nested_property_is_trimmed(
    selector: ToolSelector,
) -> None:
    tool = visa_tool()
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(400):  # past Python's recursion limit for a recursive copy
        deep = {"type": "object", "properties": {"inner": deep}}
    tool["function"]["parameters"]["properties"]["details"] = deep
    selection = await selector.select([tool], [user("A visa for Japan?")], OPTIONS)

    (trimmed,) = selection.tools
    properties = trimmed["function"]["parameters"]["properties"]
    assert "Japan" in properties["country"]["enum"]
    assert len(properties["country"]["enum"]) < len(COUNTRIES)
    assert properties["details"] is deep
    assert len(tool["function"]["parameters"]["properties"]["country"]["enum"]) == 32
