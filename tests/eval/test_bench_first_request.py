"""The first-request benchmark's requests: the same tools every time, or tools never seen."""

from __future__ import annotations

from eval.bench_first_request import CLIENT_TOOLS, body
from graph_store.names import is_valid_name


def _names(request: dict[str, object]) -> list[str]:
    tools = request["tools"]
    assert isinstance(tools, list)
    return [tool["function"]["name"] for tool in tools]


def test_a_fresh_variant_shares_no_tool_with_another_nor_with_the_plain_list() -> None:
    plain, one, two = body("select"), body("select", 1), body("select", 2)

    assert _names(plain) == list(CLIENT_TOOLS)
    assert set(_names(one)).isdisjoint(_names(plain))
    assert set(_names(one)).isdisjoint(_names(two))
    assert all(is_valid_name(name) for name in _names(one))
    assert body("select", 1) == one  # a variant is the same every time it is sent


def test_orchestrate_sends_no_tools() -> None:
    assert "tools" not in body("orchestrate")
