"""The knowledge-graph benchmark: its generator's graph has the shape the figures
claim (hubs, numbers, seeded), and the benchmark runs end to end on a small graph
through the real embedded store and writes its report."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pyoxigraph

from eval.bench_knowledge_graph import NS, calls, main, triples, write_graph

_SHARE = 0.10  # of the people each hub city holds


def _load(path: Path) -> pyoxigraph.Store:
    store = pyoxigraph.Store()
    store.bulk_load(path=str(path), format=pyoxigraph.RdfFormat.N_TRIPLES)
    return store


def test_the_graph_is_seeded_and_has_hub_cities(tmp_path: Path) -> None:
    assert list(triples(2000)) == list(triples(2000))
    path = tmp_path / "g.nt"
    written = write_graph(path, 2000)
    store = _load(path)
    assert len(store) == written  # every line is one distinct, parseable triple
    lives = pyoxigraph.NamedNode(NS + "livesIn")
    residents = Counter(str(quad.object) for quad in store.quads_for_pattern(None, lives, None))
    assert sum(residents.values()) == 2000
    hubs = [city for city, n in residents.most_common(3)]
    assert sorted(hubs) == [f"<{NS}city{i}>" for i in range(3)]
    assert all(n > 2000 * _SHARE for _, n in residents.most_common(3))
    fourth = residents.most_common(4)[3][1]
    assert fourth < min(n for _, n in residents.most_common(3)) / 2  # the rest are small


def test_the_benchmark_times_every_call_and_writes_its_report(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    argv = ["--people", "2300", "--calls", "2", "--max-entities", "20", "--out", str(out)]
    assert main(argv) == 0
    report = json.loads(out.read_text())
    labels = [label for label, _, _ in calls(random.Random(0), 2300, ("#1", "#2"))]
    assert report["triples"] > 2300 * 9
    assert list(report["p50_ms"]) == labels
    assert all(report["p95_ms"][label] >= report["p50_ms"][label] > 0 for label in labels)
    shape = report["answer_shape"]
    assert shape["find_entities (exact name)"] == {"count": 1}
    assert shape["get_neighbors (hub: ^livesIn)"] == {"count": 20, "truncated": True}
    assert shape["count (residents)"] == {"count": 20, "at_least": True}
    assert isinstance(shape["argmax (residents: salary)"]["value"], int)
    assert len(report["load_average_before"]) == 3
