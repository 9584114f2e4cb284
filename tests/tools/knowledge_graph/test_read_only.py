"""Nothing writes through the knowledge-graph pack: an update is refused before it is
sent (the endpoint here is a read-WRITE ``oxigraph serve``, so the refusal is the
pack's own), and hostile arguments cannot reach a query's text on any backend."""

from __future__ import annotations

import pytest

from proxy.errors import ToolInputRejected
from proxy.tools.packs.knowledge_graph.bolt import check_read
from proxy.tools.packs.knowledge_graph.rdf import RdfGraph
from proxy.tools.packs.knowledge_graph.sparql import EmbeddedStore, SparqlEndpoint, check_query
from tests.tools.knowledge_graph.conftest import Geo
from tests.tools.knowledge_graph.geography import GEO, OxigraphServer, place_count

UPDATES = [
    "INSERT DATA { <http://example.org/x> <http://example.org/p> 1 }",
    "DELETE WHERE { ?s ?p ?o }",
    "CLEAR ALL",
    "DROP ALL",
    "LOAD <http://example.org/evil.ttl>",
    "SELECT * WHERE { ?s ?p ?o } ; DELETE WHERE { ?s ?p ?o }",
]


@pytest.mark.parametrize("update", UPDATES)
async def test_an_update_never_reaches_the_endpoint(
    sparql_server: OxigraphServer, update: str
) -> None:
    before = sparql_server.count()
    endpoint = SparqlEndpoint(sparql_server.url, timeout=10)
    try:
        with pytest.raises(ToolInputRejected, match="only a SPARQL query may run here"):
            await endpoint.select(update)
    finally:
        await endpoint.aclose()
    assert sparql_server.count() == before == 619


@pytest.mark.parametrize("update", UPDATES[:3])
async def test_the_embedded_store_refuses_an_update_too(update: str, tmp_path: object) -> None:
    from proxy.tools.packs.knowledge_graph.catalog import DEMO

    store = EmbeddedStore.open(DEMO, timeout=10)
    with pytest.raises(ToolInputRejected, match="only a SPARQL query may run here"):
        await store.select(update)
    rows = await store.select("SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }")
    assert rows[0]["n"].json() == 619


HOSTILE_RELATIONS = [
    GEO + "borders> ?o } ; DELETE WHERE { ?s ?p ?o } #",
    "borders]->(m) DETACH DELETE m //",
    "borders`]->() CREATE (:Evil) //",
]


@pytest.mark.parametrize("relation", HOSTILE_RELATIONS)
async def test_a_hostile_relation_is_refused_as_unknown(geo: Geo, relation: str) -> None:
    before = await _size(geo)
    await geo.call("find_entities", name="Spain")
    with pytest.raises(ToolInputRejected, match="does not lead from #0"):
        await geo.call("get_neighbors", variable="#0", relation=relation)
    assert await _size(geo) == before


HOSTILE_NAMES = [
    'Paris")) } ; DROP ALL #',
    "Paris' DETACH DELETE n //",
    'x" } } INSERT DATA { <http://e/x> <http://e/p> 1 } #',
]


@pytest.mark.parametrize("name", HOSTILE_NAMES)
async def test_a_hostile_name_is_only_a_name(geo: Geo, name: str) -> None:
    before = await _size(geo)
    with pytest.raises(ToolInputRejected, match="no entity named"):
        await geo.call("find_entities", name=name)
    assert await _size(geo) == before


async def test_a_hostile_entity_id_is_refused_or_only_an_id(geo: Geo) -> None:
    before = await _size(geo)
    hostile = "http://e/x> ?p ?o } ; DROP ALL #') DETACH DELETE n //"
    if geo.backend == "bolt":  # a parameter: it names no node, and does nothing else
        assert (await geo.call("get_relations", variable=hostile))["relations"] == []
    else:
        with pytest.raises(ToolInputRejected, match="is not an absolute IRI"):
            await geo.call("get_relations", variable=hostile)
    assert await _size(geo) == before


@pytest.mark.parametrize(
    "cypher",
    [
        "MATCH (n) DETACH DELETE n",
        "CREATE (n:Evil)",
        "MATCH (n) SET n.name = 'x'",
        "MERGE (n:Evil {name: 'x'})",
        "CALL dbms.security.createUser('x', 'y', false)",
        "LOAD CSV FROM 'file:///etc/passwd' AS line RETURN line",
        "MATCH (n) REMOVE n.name",
    ],
)
def test_cypher_that_writes_is_refused(cypher: str) -> None:
    with pytest.raises(ToolInputRejected, match="only reading Cypher may run here"):
        check_read(cypher)


def test_every_query_text_of_the_pack_passes_its_own_checks() -> None:
    from proxy.tools.packs.knowledge_graph import bolt

    texts = [value for name, value in vars(bolt).items() if name.startswith("_") and
             isinstance(value, str) and value.startswith("MATCH")]  # fmt: skip
    assert len(texts) == 10
    for text in texts:
        check_read(text)
    check_query("SELECT ?s WHERE { ?s ?p ?o } LIMIT 1")


async def _size(geo: Geo) -> int:
    """Triples in the RDF backends, nodes on the Bolt server."""
    if geo.backend == "bolt":
        return place_count(geo.bolt_uri)
    graph = await geo.pack.graphs[0].backend()
    assert isinstance(graph, RdfGraph)
    rows = await graph.transport.select("SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }")
    return int(rows[0]["n"].value)
