"""The tools a conversation loaded in select mode, kept in load order (no model)."""

from __future__ import annotations

from typing import Any

from proxy.select.deferred import split_deferred
from proxy.select.loaded import LoadedTool, conversation_key, merge_loaded, tool_digest
from retriever.documents import forced_name, function_name


def tool(name: str, description: str = "does a thing") -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": description}}


def loaded(*names: str) -> list[LoadedTool]:
    return [LoadedTool(n, tool_digest(tool(n)), tool(n)) for n in names]


def offered(*names: str) -> dict[str, str]:
    return {n: tool_digest(tool(n)) for n in names}


def names(tools: list[LoadedTool]) -> list[str]:
    return [t.name for t in tools]


def test_earlier_tools_stay_in_load_order_and_new_ones_go_last() -> None:
    merged = merge_loaded(loaded("b", "a"), offered("a", "b", "c", "d"), loaded("d", "a"), 10)
    assert names(merged) == ["b", "a", "d"]


def test_nothing_new_keeps_the_list_as_it_was() -> None:
    previous = loaded("b", "a")
    assert merge_loaded(previous, offered("a", "b", "c"), loaded("a"), 10) == previous


def test_a_tool_the_client_stopped_sending_leaves() -> None:
    merged = merge_loaded(loaded("a", "b"), offered("b", "c"), loaded("c"), 10)
    assert names(merged) == ["b", "c"]


def test_a_changed_tool_is_loaded_again_in_its_place_or_leaves() -> None:
    changed = tool("a", "does another thing")
    now = {"a": tool_digest(changed), "b": tool_digest(tool("b"))}
    fresh = [LoadedTool("a", now["a"], changed)]
    merged = merge_loaded(loaded("a", "b"), now, fresh, 10)
    assert names(merged) == ["a", "b"]
    assert merged[0].forwarded == changed
    assert names(merge_loaded(loaded("a", "b"), now, [], 10)) == ["b"]  # not needed now


def test_past_the_cap_the_newest_unselected_go_so_the_prefix_holds() -> None:
    merged = merge_loaded(loaded("a", "b", "c"), offered(*"abcde"), loaded("a", "d", "e"), 3)
    assert names(merged) == ["a", "d", "e"]
    merged = merge_loaded(loaded(*"abcd"), offered(*"abcde"), loaded("a", "e"), 4)
    assert names(merged) == ["a", "b", "c", "e"]  # d went: a, b, c stay the prefix


def test_a_conversation_is_its_client_and_leading_messages() -> None:
    first = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "weather?"}]
    later = [*first, {"role": "assistant", "content": "Sunny."}, {"role": "user", "content": "and"}]
    assert conversation_key("k1", first) == conversation_key("k1", later)
    assert conversation_key("k1", first) != conversation_key("k2", first)
    other = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "visa?"}]
    assert conversation_key("k1", other) != conversation_key("k1", first)


def test_deferred_tools_are_the_ones_to_choose_from_and_lose_the_flag() -> None:
    always = tool("always")
    later = {**tool("later"), "defer_loading": True}
    nested = tool("nested")
    nested["function"]["defer_loading"] = True
    fixed, candidates = split_deferred([always, later, nested])
    assert fixed == [always]
    assert candidates == [tool("later"), tool("nested")]
    assert split_deferred([always, tool("x")]) == ([], [always, tool("x")])  # none marked


def test_a_function_is_named_in_either_api_form_and_other_tools_are_not() -> None:
    assert function_name(tool("nested_form")) == "nested_form"
    assert function_name({"type": "function", "name": "flat_form"}) == "flat_form"
    assert function_name({"type": "tool_search"}) is None
    assert forced_name({"type": "function", "function": {"name": "always"}}) == "always"
    assert forced_name("auto") is None
