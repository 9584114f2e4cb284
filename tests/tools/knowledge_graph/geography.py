"""The demo geography graph in each backend: the Turtle file as shipped, an Oxigraph
SPARQL server loaded from it, and the same entities as nodes on the Bolt server."""

from __future__ import annotations

import re
import subprocess
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import httpx
import neo4j
import pyoxigraph

from graph_store.neo4j_store import bolt_target
from proxy.tools.packs.knowledge_graph.catalog import DEMO
from testing.arcadedb_server import free_port

GEO = "http://example.org/geo/"
_LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"


def local(iri: str) -> str:
    return re.split(r"[/#]", iri)[-1]


class OxigraphServer:
    """``oxigraph serve`` (PyPI ``oxigraph``, the project's own server) read-write on a
    free port: the pack must stay read-only with nothing on the server's side helping."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/query"
        self._process: subprocess.Popen[bytes] | None = None

    def start(self, binary: str) -> None:
        store = str(self.root / "store")
        subprocess.run(
            [binary, "load", "--location", store, "--file", str(DEMO)],
            check=True,
            capture_output=True,
        )
        with (self.root / "server.log").open("wb") as log:
            self._process = subprocess.Popen(
                [binary, "serve", "--location", store, "--bind", f"127.0.0.1:{self.port}"],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                httpx.get(self.url, params={"query": "ASK {}"}, timeout=2).raise_for_status()
                return
            except httpx.HTTPError:
                time.sleep(0.1)
        raise RuntimeError("oxigraph serve gave no answer in 30 s")

    def count(self) -> int:
        reply = httpx.post(
            self.url,
            data={"query": "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }"},
            headers={"accept": "application/sparql-results+json"},
        )
        return int(reply.json()["results"]["bindings"][0]["n"]["value"])

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()
            self._process.wait(10)
            self._process = None


def load_bolt(uri: str) -> None:
    """Every IRI of the demo as a ``Place`` node (its label as ``name``, its literals as
    properties), every IRI-to-IRI triple as a relationship named by the predicate."""
    store = pyoxigraph.Store()
    store.bulk_load(path=str(DEMO))
    properties: dict[str, dict[str, Any]] = defaultdict(dict)
    edges: dict[str, list[dict[str, str]]] = defaultdict(list)
    for quad in store:
        subject, predicate, obj = quad.subject.value, quad.predicate.value, quad.object
        properties[subject]["iri"] = subject
        if isinstance(obj, pyoxigraph.Literal):
            key = "name" if predicate == _LABEL else local(predicate)
            value = obj.value
            number = obj.datatype.value.endswith("#integer")
            properties[subject][key] = int(value) if number else value
        elif predicate != _TYPE:
            properties[obj.value]["iri"] = obj.value
            edges[local(predicate)].append({"a": subject, "b": obj.value})
    address, auth, database = bolt_target(uri)
    driver = neo4j.GraphDatabase.driver(address, auth=auth)
    with driver, driver.session(database=database) as session:
        session.run("MATCH (n:Place) DETACH DELETE n").consume()
        session.run(
            "UNWIND $rows AS row CREATE (n:Place) SET n = row",
            rows=list(properties.values()),
        ).consume()
        for kind, rows in edges.items():
            session.run(
                "UNWIND $rows AS row MATCH (a:Place {iri: row.a}) MATCH (b:Place {iri: row.b}) "
                f"CREATE (a)-[:`{kind}`]->(b)",
                rows=rows,
            ).consume()


def place_count(uri: str) -> int:
    address, auth, database = bolt_target(uri)
    with neo4j.GraphDatabase.driver(address, auth=auth) as driver:
        records, _, _ = driver.execute_query("MATCH (n) RETURN count(n) AS n", database_=database)
    return int(records[0]["n"])
