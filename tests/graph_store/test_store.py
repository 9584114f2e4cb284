"""One suite, two backends: the in-process store and Neo4j (ArcadeDB's Bolt server)."""

from __future__ import annotations

import pytest

from graph_store.errors import InvalidItem
from graph_store.models import EdgeKind, Endpoint, ParamLocation
from graph_store.store import GraphStore, expand, graph_stats, neighbors
from tests.graph_store.tools import edge, make_tool

SEQ, STRONG, WEAK = EdgeKind.SEQUENTIAL, EdgeKind.STRONG_DEP, EdgeKind.WEAK_DEP

search = make_tool("search_hotels", group="hotels")
details = make_tool("hotel_details", group="hotels")
book = make_tool("book_hotel", group="booking")
weather = make_tool("get_weather", category="weather", group="forecast")
review = make_tool("hotel_reviews", group="hotels")


@pytest.fixture
def graph(store: GraphStore) -> GraphStore:
    store.upsert_tools([search, details, book, weather, review])
    store.upsert_edges(
        [
            edge(search, details, STRONG, 0.9, resource="hotel_id", origin="schema"),
            edge(search, details, SEQ, 0.5, count=5, origin="calls"),
            edge(search, book, WEAK, 0.4, resource="hotel_id", origin="schema"),
            edge(search, weather, SEQ, 0.3, count=3, origin="calls"),
            edge(search, review, SEQ, 0.2, count=2, origin="calls"),
            edge(details, book, STRONG, 0.8, resource="room_id", origin="schema"),
            edge(book, weather, SEQ, 1.0, count=1, origin="calls"),
        ]
    )
    return store


def test_tools_are_found_by_id_name_and_alias(store: GraphStore) -> None:
    tool = make_tool(
        "search_hotels",
        aliases=("search_for_hotels_api",),
        endpoint=Endpoint(
            method="GET", url="https://x/{city}", locations={"city": ParamLocation.PATH}
        ),
        parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": []},
    )
    store.upsert_tools([tool])
    assert store.get_tool(tool.id) == tool
    assert store.get_tool("search_hotels") == tool
    assert store.get_tool("search_for_hotels_api") == tool
    assert store.get_tool("nope") is None
    fetched = store.get_tool(tool.id)
    assert fetched is not None
    assert fetched.endpoint is not None
    assert fetched.endpoint.locations["city"] is ParamLocation.PATH


def test_reimport_updates_and_never_duplicates(store: GraphStore) -> None:
    store.upsert_tools([search, details])
    changed = search.model_copy(update={"description": "new text", "category": "lodging"})
    store.upsert_tools([changed, details])
    assert store.count_tools() == 2
    got = store.get_tool(search.id)
    assert got is not None
    assert got.description == "new text"
    assert [c.name for c in store.categories()] == ["lodging", "travel"]


def test_a_taken_name_is_refused_and_nothing_of_the_batch_is_stored(store: GraphStore) -> None:
    store.upsert_tools([search])
    impostor = make_tool("search_hotels", group="other")  # same name, another id
    with pytest.raises(InvalidItem):
        store.upsert_tools([details, impostor])
    assert [t.name for t in store.list_tools()] == ["search_hotels"]


def test_groups_and_categories_follow_the_tools(store: GraphStore) -> None:
    store.upsert_tools([search, book, weather])
    assert [(g.name, g.category) for g in store.groups()] == sorted(
        [("hotels", "travel"), ("booking", "travel"), ("forecast", "weather")],
        key=lambda pair: make_tool("x", category=pair[1], group=pair[0]).group_id,
    )
    group = store.group_of(book.id)
    assert group is not None
    assert (group.name, group.category) == ("booking", "travel")
    moved = book.model_copy(update={"group": "hotels"})
    store.upsert_tools([moved])
    assert {g.name for g in store.groups()} == {"hotels", "forecast"}
    assert store.delete_tools([weather.id, "missing"]) == 1
    assert [c.name for c in store.categories()] == ["travel"]
    assert [t.name for t in store.list_tools(category="travel")] == ["book_hotel", "search_hotels"]


def test_neighbours_rank_strong_then_weak_then_sequential(graph: GraphStore) -> None:
    found = neighbors(graph, [search.id])
    assert [(n.name, n.kind, n.weight) for n in found] == [
        ("hotel_details", STRONG, 0.9),
        ("book_hotel", WEAK, 0.4),
        ("get_weather", SEQ, 0.3),
        ("hotel_reviews", SEQ, 0.2),
    ]
    assert found[0].resource == "hotel_id"
    assert found[0].via == search.id


def test_neighbours_filter_by_kind_category_limit_and_direction(graph: GraphStore) -> None:
    sequential = neighbors(graph, [search.id], [SEQ])
    assert [(n.name, n.count) for n in sequential] == [
        ("hotel_details", 5),
        ("get_weather", 3),
        ("hotel_reviews", 2),
    ]
    assert [n.name for n in neighbors(graph, [search.id], category="weather")] == ["get_weather"]
    assert [n.name for n in neighbors(graph, [search.id], limit=2)] == [
        "hotel_details",
        "book_hotel",
    ]
    incoming = neighbors(graph, [book.id], direction="in")
    assert [(n.name, n.kind) for n in incoming] == [
        ("hotel_details", STRONG),
        ("search_hotels", WEAK),
    ]


def test_neighbours_of_several_tools_leave_the_starts_out(graph: GraphStore) -> None:
    found = neighbors(graph, [search.id, details.id])
    assert [(n.name, n.via) for n in found] == [
        ("book_hotel", details.id),
        ("get_weather", search.id),
        ("hotel_reviews", search.id),
    ]


def test_k_hop_expansion(graph: GraphStore) -> None:
    assert expand(graph, [details.id], 1) == {details.id: 0, book.id: 1}
    assert expand(graph, [details.id], 3) == {details.id: 0, book.id: 1, weather.id: 2}
    assert expand(graph, [details.id], 3, [STRONG]) == {details.id: 0, book.id: 1}


def test_replacing_an_origin_keeps_the_other_edges(graph: GraphStore) -> None:
    graph.replace_edges("calls", [edge(review, book, SEQ, 1.0, count=7, origin="calls")])
    kinds = {(e.src, e.dst, e.kind): e.count for e in graph.edges()}
    assert kinds == {
        (search.id, details.id, STRONG): 0,
        (search.id, book.id, WEAK): 0,
        (details.id, book.id, STRONG): 0,
        (review.id, book.id, SEQ): 7,
    }
    assert [e.dst for e in graph.edges(SEQ)] == [book.id]


def test_an_edge_to_an_unknown_tool_is_refused_whole(graph: GraphStore) -> None:
    ghost = make_tool("ghost")
    before = graph.edges()
    with pytest.raises(InvalidItem, match="no tool"):
        graph.upsert_edges([edge(review, details, SEQ, 1.0), edge(search, ghost, SEQ, 1.0)])
    assert graph.edges() == before


def test_deleting_a_tool_drops_its_edges(graph: GraphStore) -> None:
    graph.delete_tools([details.id])
    assert all(details.id not in (e.src, e.dst) for e in graph.edges())
    assert len(graph.edges()) == 4


def test_availability_is_stored(graph: GraphStore) -> None:
    graph.set_availability({search.id: 0.75, "missing": 0.1})
    got = graph.get_tool(search.id)
    assert got is not None
    assert got.availability == 0.75
    other = graph.get_tool(book.id)
    assert other is not None
    assert other.availability == 0.5


def test_stats_count_nodes_edges_degrees_and_components(graph: GraphStore) -> None:
    lonely = make_tool("lonely", category="misc", group="solo")
    graph.upsert_tools([lonely])
    stats = graph_stats(graph)
    assert (stats.tools, stats.groups, stats.categories) == (6, 4, 3)
    assert stats.edges == {"STRONG_DEP": 2, "WEAK_DEP": 1, "SEQUENTIAL": 4}
    # out-degrees: search 5, details 1, book 1, weather 0, review 0, lonely 0
    assert stats.out_degree == {0: 3, 1: 2, 5: 1}
    assert (stats.components, stats.largest_component) == (2, 5)


def test_neighbours_see_every_change(graph: GraphStore) -> None:
    assert [n.name for n in neighbors(graph, [review.id])] == []
    graph.upsert_edges([edge(review, book, WEAK, 0.5, resource="hotel_id")])
    assert [n.name for n in neighbors(graph, [review.id])] == ["book_hotel"]
    graph.delete_tools([book.id])
    assert [n.name for n in neighbors(graph, [review.id])] == []
    assert [n.name for n in neighbors(graph, [search.id], [WEAK])] == []


def test_every_write_changes_the_version(store: GraphStore) -> None:
    writes = [
        lambda: store.upsert_tools([search, details]),
        lambda: store.upsert_edges([edge(search, details, STRONG, 0.9)]),
        lambda: store.replace_edges("schema", []),
        lambda: store.set_availability({search.id: 0.5}),
        lambda: store.delete_tools([details.id]),
        store.clear,
    ]
    seen = [store.version()]
    for write in writes:
        write()
        seen.append(store.version())
    assert len(set(seen)) == len(seen)


def test_another_handle_sees_writes_once_it_refreshes(store: GraphStore, twin: GraphStore) -> None:
    assert twin.get_tool(search.id) is None
    store.upsert_tools([search])
    assert twin.version() == store.version()
    twin.refresh()
    assert twin.get_tool("search_hotels") == search
    twin.delete_tools([search.id])
    store.refresh()
    assert store.get_tool(search.id) is None
    assert store.version() == twin.version()


def test_writes_through_two_handles_are_both_kept(store: GraphStore, twin: GraphStore) -> None:
    store.upsert_tools([search])
    twin.upsert_tools([details])  # without a refresh of its own first
    store.upsert_edges([edge(search, details, STRONG, 0.9)])
    for handle in (store, twin):
        handle.refresh()
        assert set(handle.names()) == {"search_hotels", "hotel_details"}
        assert len(handle.edges()) == 1
