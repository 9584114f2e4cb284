"""Every tool of the knowledge-graph pack against the embedded Oxigraph store, a real
SPARQL endpoint (``oxigraph serve``) and the Bolt server, on questions about the demo
geography graph whose answers were worked out by hand from demo/geography.ttl."""

from __future__ import annotations

import pytest

from proxy.errors import ToolInputRejected
from proxy.tools.packs.knowledge_graph.catalog import knowledge_graph_tools
from proxy.tools.variables import Variables
from tests.tools.knowledge_graph.conftest import Geo, settings_for


def test_each_graph_gives_eight_tools_named_after_it(request: pytest.FixtureRequest) -> None:
    tools = knowledge_graph_tools([settings_for("embedded", request, description="places.")])
    assert [tool.name for tool in tools] == [
        "geo_find_entities", "geo_get_relations", "geo_get_neighbors", "geo_get_attributes",
        "geo_argmax", "geo_argmin", "geo_intersection", "geo_count",
    ]  # fmt: skip
    assert {tool.category for tool in tools} == {"knowledge_graph"}
    assert all(tool.endpoint and tool.endpoint.url.startswith("builtin:geo_") for tool in tools)
    assert "geo knowledge graph (places)" in tools[0].description


async def test_find_entities_names_a_variable(geo: Geo) -> None:
    found = await geo.call("find_entities", name="germany")
    assert found["variable"] == "#0"
    assert found["count"] == 1
    assert await geo.names(found) == {"Germany"}
    again = await geo.call("find_entities", name="Danube")
    assert again["variable"] == "#1"


async def test_find_entities_falls_back_to_part_of_a_name(geo: Geo) -> None:
    found = await geo.call("find_entities", name="Mount ")
    assert await geo.names(found) == {"Mount Fuji", "Mount Logan"}


async def test_an_unknown_name_is_refused_with_advice(geo: Geo) -> None:
    with pytest.raises(ToolInputRejected, match="no entity named 'Atlantis'"):
        await geo.call("find_entities", name="Atlantis")


async def test_relations_go_both_ways(geo: Geo) -> None:
    await geo.call("find_entities", name="Seine")
    relations = (await geo.call("get_relations", variable="#0"))["relations"]
    assert geo.relation("flowsThrough") in relations
    assert geo.relation("^onRiver") in relations  # Paris lies on it
    assert geo.attribute("length") not in relations  # a number is an attribute


async def test_three_hops_the_most_populous_neighbour_of_germany(geo: Geo) -> None:
    await geo.call("find_entities", name="Germany")
    neighbours = await geo.call("get_neighbors", variable="#0", relation=geo.relation("borders"))
    assert neighbours["variable"] == "#1"
    assert neighbours["count"] == 9
    largest = await geo.call("argmax", variable="#1", attribute=geo.attribute("population"))
    assert await geo.names(largest) == {"France"}
    assert largest["value"] == 68_000_000
    smallest = await geo.call("argmin", variable="#1", attribute=geo.attribute("area"))
    assert await geo.names(smallest) == {"Luxembourg"}
    assert smallest["value"] == 2586


async def test_backwards_relation_the_cities_on_the_danube(geo: Geo) -> None:
    await geo.call("find_entities", name="Danube")
    cities = await geo.call("get_neighbors", variable="#0", relation=geo.relation("^onRiver"))
    assert await geo.names(cities) == {"Vienna", "Budapest"}


async def test_intersection_and_count(geo: Geo) -> None:
    await geo.call("find_entities", name="Rhine")  # #0
    await geo.call("find_entities", name="Danube")  # #1
    flows = geo.relation("flowsThrough")
    await geo.call("get_neighbors", variable="#0", relation=flows)  # #2
    await geo.call("get_neighbors", variable="#1", relation=flows)  # #3
    both = await geo.call("intersection", variable1="#2", variable2="#3")
    assert await geo.names(both) == {"Germany", "Austria"}
    assert await geo.call("count", variable=both["variable"]) == {"variable": "#4", "count": 2}
    assert (await geo.call("count", variable="#2"))["count"] == 5


async def test_attributes_with_examples(geo: Geo) -> None:
    await geo.call("find_entities", name="Mont Blanc")
    attributes = (await geo.call("get_attributes", variable="#0"))["attributes"]
    assert attributes[geo.attribute("elevation")] == 4806


async def test_an_entity_id_serves_as_a_variable(geo: Geo) -> None:
    found = await geo.call("find_entities", name="Japan")
    japan = found["entities"][0]["id"]
    capital = await geo.call("get_neighbors", variable=japan, relation=geo.relation("capital"))
    assert await geo.names(capital) == {"Tokyo"}


async def test_wrong_arguments_are_refused_with_what_is_there(geo: Geo) -> None:
    with pytest.raises(
        ToolInputRejected, match=r"no variable '#0' in this request \(made so far: none yet\)"
    ):
        await geo.call("get_relations", variable="#0")
    await geo.call("find_entities", name="Portugal")
    with pytest.raises(ToolInputRejected, match="relation 'bordrs' does not lead from #0") as bad:
        await geo.call("get_neighbors", variable="#0", relation="bordrs")
    assert geo.relation("borders") in str(bad.value)
    with pytest.raises(ToolInputRejected, match="no attribute 'height' on #0") as wrong:
        await geo.call("argmax", variable="#0", attribute="height")
    assert geo.attribute("population") in str(wrong.value)
    with pytest.raises(ToolInputRejected, match=r"no variable '#7'.*made so far: #0"):
        await geo.call("count", variable="#7")


async def test_variables_belong_to_one_request(geo: Geo) -> None:
    await geo.call("find_entities", name="Egypt")
    other = Geo(geo.pack, geo.backend, Variables())
    with pytest.raises(ToolInputRejected, match="no variable '#0'"):
        await other.call("count", variable="#0")


async def test_a_set_larger_than_the_cap_is_cut_and_says_so(
    request: pytest.FixtureRequest, geo: Geo
) -> None:
    from proxy.tools.packs.knowledge_graph.catalog import KnowledgeGraphPack

    pack = KnowledgeGraphPack.open([settings_for(geo.backend, request, max_entities=3)])
    capped = Geo(pack, geo.backend, Variables())
    try:
        await capped.call("find_entities", name="Germany")
        cut = await capped.call("get_neighbors", variable="#0", relation=geo.relation("borders"))
        assert cut["count"] == 3
        assert cut["truncated"] is True
        assert await capped.call("count", variable="#1") == {
            "variable": "#1", "count": 3, "at_least": True,
        }  # fmt: skip
    finally:
        await pack.aclose()
