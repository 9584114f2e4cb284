"""Graph building: call paths, the schema rule pass, TaskBench graphs."""

from __future__ import annotations

import gzip
import itertools
import json
from pathlib import Path

import pytest

from graph_store.edges.build import build_graph
from graph_store.edges.schema_deps import name_key, schema_edges
from graph_store.embedded import InProcessStore
from graph_store.ingest.catalog import import_paths
from graph_store.ingest.toolbench import toolbench_name
from graph_store.models import EdgeKind, Tool
from graph_store.store import GraphStore, neighbors
from tests.graph_store.conftest import FIXTURES
from tests.graph_store.tools import make_tool

SEQ, STRONG, WEAK = EdgeKind.SEQUENTIAL, EdgeKind.STRONG_DEP, EdgeKind.WEAK_DEP


def _names(store: GraphStore) -> dict[tuple[str, str, EdgeKind], tuple[float, int]]:
    tools = {tool.id: tool.name for tool in store.list_tools()}
    return {
        (tools[e.src], tools[e.dst], e.kind): (round(e.weight, 3), e.count) for e in store.edges()
    }


def test_sequential_edges_follow_the_thesis_cleaning_rules(store: GraphStore) -> None:
    names = ["search_hotels", "hotel_details", "book_hotel", "hotel_reviews", "get_weather"]
    store.upsert_tools([make_tool(name) for name in names])
    report = build_graph(store, call_files=[FIXTURES / "calls.jsonl"])
    # 1: search→details→book (repeat folded); 2: search→details; 3 and 7 gave up;
    # 4: the failed reviews call splits search | weather; 5: the pruned book is gone:
    # search→reviews; 6: an unknown tool splits search | weather.
    assert _names(store) == {
        ("search_hotels", "hotel_details", SEQ): (0.667, 2),
        ("search_hotels", "hotel_reviews", SEQ): (0.333, 1),
        ("hotel_details", "book_hotel", SEQ): (1.0, 1),
    }
    assert report.calls is not None
    assert (report.calls.paths, report.calls.kept_paths) == (8, 4 + 1)
    assert report.calls.unknown == {"not_in_catalog": 1}
    assert [(e.item, e.problem) for e in report.errors] == [("line 8", "needs a 'calls' list")]
    # Availability where calls said how they went: search 2 of 2, reviews 1 of 2.
    availability = {t.name: t.availability for t in store.list_tools()}
    assert availability["search_hotels"] == pytest.approx(3 / 4)
    assert availability["hotel_reviews"] == pytest.approx(2 / 4)
    assert availability["hotel_details"] == 0.5  # the prior: no call said


def test_rebuilding_from_calls_replaces_only_call_edges(store: GraphStore) -> None:
    store.upsert_tools([make_tool(n) for n in ["search_hotels", "hotel_details", "book_hotel"]])
    build_graph(store, call_files=[FIXTURES / "calls.jsonl"])
    search, details = store.get_tool("search_hotels"), store.get_tool("hotel_details")
    assert search is not None
    assert details is not None
    from tests.graph_store.tools import edge

    store.upsert_edges([edge(search, details, STRONG, 0.9, origin="schema")])
    build_graph(store, call_files=[FIXTURES / "calls.jsonl"])
    assert len(store.edges(SEQ)) == 2
    assert len(store.edges(STRONG)) == 1


def _catalog_for_calls(shared: Path, tmp_path: Path, paths: int) -> tuple[Path, Path]:
    """The first call paths of StableToolBench, and the corpus lines of the APIs they call."""
    sequences = shared / "toolbench_stable" / "trajectories_gpt35_cot" / "call_sequences.jsonl"
    with sequences.open(encoding="utf-8") as lines:
        head = list(itertools.islice(lines, paths))
    called = {name for line in head for name in json.loads(line)["calls"]}
    keep = []
    with gzip.open(shared / "toolbench_stable" / "corpus.jsonl.gz", "rt", encoding="utf-8") as rows:
        for line in rows:
            row = json.loads(line)
            if toolbench_name(row["api_name"], row["tool_name"]) in called:
                keep.append(line)
    (tmp_path / "calls.jsonl").write_text("".join(head))
    (tmp_path / "corpus.jsonl").write_text("".join(keep))
    return tmp_path / "calls.jsonl", tmp_path / "corpus.jsonl"


def test_toolbench_call_paths_make_sequential_edges(shared_data: Path, tmp_path: Path) -> None:
    calls, corpus = _catalog_for_calls(shared_data, tmp_path, 60)
    store = InProcessStore()
    import_paths(store, [corpus])
    report = build_graph(store, call_files=[calls])
    edges = _names(store)
    # query 61873 answered: transaction count, then balance
    assert (
        "account_transaction_count_for_binance_smart_chain",
        "account_balance_for_binance_smart_chain",
        SEQ,
    ) in edges
    # query 56674 gave no answer: its regions → trendings transition is not evidence
    assert not any(src == "regions_for_google_trends" for src, _, _ in edges)
    assert report.calls is not None
    assert report.calls.kept_paths < report.calls.paths
    for src in {e.src for e in store.edges()}:
        assert sum(e.weight for e in store.edges() if e.src == src) == pytest.approx(1.0)


def _tool(
    name: str,
    group: str,
    params: dict[str, str],
    required: list[str],
    response: dict[str, object] | None = None,
) -> Tool:
    properties = {p: {"type": t, "description": ""} for p, t in params.items()}
    schema = {"type": "object", "properties": properties, "required": required}
    output = {"type": "object", "properties": response} if response is not None else None
    return make_tool(name, group=group, parameters=schema, response_schema=output)


def test_the_rule_pass_matches_outputs_to_inputs() -> None:
    hit = {"type": "object", "properties": {"hotel_id": {"type": "integer"}, "name": {}}}
    search = _tool(
        "search_hotels",
        "hotels",
        {"city": "string", "page": "integer"},
        ["city"],
        {"results": {"type": "array", "items": hit}},
    )
    details = _tool("hotel_details", "hotels", {"hotelId": "string"}, ["hotelId"])
    book = _tool("book_hotel", "hotels", {"hotel_id": "string", "flag": "boolean"}, [])
    page_user = _tool("next_page", "hotels", {"page": "integer"}, ["page"])
    other_id = _tool("movie", "movies", {"hotel_id": "boolean"}, ["hotel_id"])
    geo = _tool("geocode", "maps", {"address": "string"}, ["address"], {"lat": {}})
    weather = _tool("weather", "weather", {"latitude": "number"}, ["latitude"])
    edges = schema_edges([search, details, book, page_user, other_id, geo, weather])
    names = {t.id: t.name for t in [search, details, book, page_user, other_id, geo, weather]}
    found = {(names[e.src], names[e.dst], e.kind, e.resource) for e in edges}
    assert found == {
        ("search_hotels", "hotel_details", STRONG, "hotel_id"),  # required, camelCase folded
        ("search_hotels", "book_hotel", WEAK, "hotel_id"),  # optional
        ("geocode", "weather", WEAK, "latitude"),  # lat = latitude, universal, other group
    }
    strong = next(e for e in edges if e.kind is STRONG)
    assert strong.reason == "results.hotel_id -> hotelId"


def test_name_keys() -> None:
    assert name_key("hotelIds") == "hotel_id"
    assert name_key("Postal-Code") == "postal_code"
    assert name_key("zip") == "postal_code"
    assert name_key("categories") == "category"


@pytest.mark.parametrize(
    ("domain", "links", "kind"),
    [("data_huggingface", 225, STRONG), ("data_dailylifeapis", 1560, SEQ)],
)
def test_taskbench_graphs_as_given(
    shared_data: Path, domain: str, links: int, kind: EdgeKind
) -> None:
    folder = shared_data / "taskbench" / domain
    store = InProcessStore()
    import_paths(store, [folder / "tool_desc.json"])
    report = build_graph(store, taskbench_graphs=[folder / "graph_desc.json"])
    assert report.errors == []
    assert report.edges == {"taskbench": links}
    assert {e.kind for e in store.edges()} == {kind}
    if kind is STRONG:
        first = neighbors(store, [store.get_tool("Token_Classification").id])  # type: ignore[union-attr]
        assert {n.resource for n in first} == {"text"}
    else:
        for src in {e.src for e in store.edges()}:
            assert sum(e.weight for e in store.edges() if e.src == src) == pytest.approx(1.0)


def test_a_taskbench_link_to_an_unknown_tool_is_named(tmp_path: Path) -> None:
    folder = tmp_path / "data_tiny"
    folder.mkdir()
    nodes = [{"id": "A", "desc": "a", "input-type": ["text"], "output-type": ["image"]}]
    (folder / "tool_desc.json").write_text(json.dumps({"nodes": nodes}))
    links = [{"source": "A", "target": "B", "type": "image"}]
    (folder / "graph_desc.json").write_text(json.dumps({"nodes": nodes, "links": links}))
    store = InProcessStore()
    import_paths(store, [folder / "tool_desc.json"])
    report = build_graph(store, taskbench_graphs=[folder / "graph_desc.json"])
    assert [(e.item, e.problem) for e in report.errors] == [
        ("links[0]", "no tool 'B' in the catalog")
    ]


def test_a_bare_id_joins_only_tools_about_the_entity_it_names() -> None:
    hits = {"type": "array", "items": {"type": "object", "properties": {"id": {"type": "string"}}}}
    search = _tool("search_hotels", "hotels", {}, [], {"results": hits})
    reviews = _tool("get_reviews", "hotels", {}, [], {"id": {"type": "string"}})
    details = make_tool(
        "hotel_details",
        group="hotels",
        parameters={
            "type": "object",
            "properties": {"id": {"type": "string", "description": "The id of the hotel"}},
            "required": ["id"],
        },
    )
    vague = _tool("get_thing", "hotels", {"id": "string"}, ["id"])  # says nothing of whose id
    edges = schema_edges([search, reviews, details, vague])
    assert [(e.src, e.dst, e.kind) for e in edges] == [(search.id, details.id, STRONG)]
