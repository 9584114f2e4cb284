"""The graph store's figures on toolbench_stable (the folder :mod:`eval.data_folder` names).

    python -m eval.graph_store_bench import      # import the 47k-API corpus: seconds, peak RSS
    python -m eval.graph_store_bench graph       # edges from 600 call paths + schema rules,
                                                 # and the gold call pairs they cover
    python -m eval.graph_store_bench traversal   # neighbour expansion: in-process vs Bolt
                                                 # (ArcadeDB), p50/p99, in one run

Each prints markdown lines for graph_store/README.md.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import resource
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from eval.data_folder import dataset
from graph_store.edges.build import build_graph
from graph_store.embedded import InProcessStore
from graph_store.ingest.catalog import import_paths
from graph_store.ingest.toolbench import toolbench_name
from graph_store.neo4j_store import Neo4jStore
from graph_store.store import GraphStore, graph_stats, neighbors
from testing.arcadedb_server import ArcadeDBServer

REPO = Path(__file__).resolve().parents[1]
DATA = dataset("toolbench_stable")
CORPUS = DATA / "corpus.jsonl.gz"
CALLS = DATA / "trajectories_gpt35_cot" / "call_sequences.jsonl"
QUERIES = DATA / "queries.jsonl"


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def bench_import(directory: Path) -> None:
    before = _peak_mib()
    store = InProcessStore.open(directory)
    started = time.perf_counter()
    report = import_paths(store, [CORPUS])
    seconds = time.perf_counter() - started
    print(f"- import of the corpus: {report.summary()}")
    size = (directory / "graph.bin").stat().st_size / 2**20
    print(
        f"- {seconds:.1f} s, peak RSS {_peak_mib():.0f} MiB (interpreter and imports before: "
        f"{before:.0f} MiB); store file {size:.0f} MiB"
    )
    loads = []
    for _ in range(5):
        started = time.perf_counter()
        InProcessStore.open(directory)
        loads.append(time.perf_counter() - started)
    print(f"- reopening the store: median {statistics.median(loads):.2f} s over 5 loads")


def _built_store() -> tuple[InProcessStore, float]:
    store = InProcessStore()
    import_paths(store, [CORPUS])
    started = time.perf_counter()
    build_graph(store, call_files=[CALLS], schema=True)
    return store, time.perf_counter() - started


def bench_graph() -> None:
    store, seconds = _built_store()
    kinds = Counter(edge.kind.value for edge in store.edges())
    origins = Counter(edge.origin for edge in store.edges())
    print(
        f"- build (600 call paths + schema rules over {store.count_tools()} tools): {seconds:.1f} s"
    )
    print("- edges by kind: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
    print("- edges by origin: " + ", ".join(f"{k} {v}" for k, v in sorted(origins.items())))
    stats = graph_stats(store)
    top = max(stats.out_degree)
    isolated = stats.out_degree.get(0, 0)
    print(
        f"- {stats.components} weakly connected components (largest {stats.largest_component} "
        f"tools); {isolated} tools without out-edges; highest out-degree {top}"
    )
    _coverage(store)


def _coverage(store: GraphStore) -> None:
    seen = {
        (row["group"], str(row["query_id"]))
        for row in map(json.loads, CALLS.read_text().splitlines())
    }
    kinds_between: dict[tuple[str, str], set[str]] = {}
    for edge in store.edges():
        kinds_between.setdefault((edge.src, edge.dst), set()).add(edge.kind.value)
    tally: Counter[str] = Counter()
    for row in map(json.loads, QUERIES.read_text().splitlines()):
        apis = [store.get_tool(toolbench_name(api, tool)) for tool, api in row["relevant_apis"]]
        part = "in the call logs" if (row["group"], str(row["query_id"])) in seen else "unseen"
        for a, b in itertools.pairwise(apis):
            if a is None or b is None or a.id == b.id:
                continue
            tally[f"pairs {part}"] += 1
            forward = kinds_between.get((a.id, b.id), set())
            either = forward | kinds_between.get((b.id, a.id), set())
            tally[f"directed {part}"] += bool(forward)
            tally[f"either {part}"] += bool(either)
            for kind in either:
                tally[f"{kind} {part}"] += 1
    for part in ("in the call logs", "unseen"):
        pairs = tally[f"pairs {part}"]
        if not pairs:
            continue
        share = {
            key: 100 * tally[f"{key} {part}"] / pairs
            for key in ("directed", "either", "SEQUENTIAL", "STRONG_DEP", "WEAK_DEP")
        }
        print(
            f"- consecutive gold pairs of queries {part}: {pairs}; an edge A→B for "
            f"{share['directed']:.1f}%, either way {share['either']:.1f}% "
            f"(SEQUENTIAL {share['SEQUENTIAL']:.1f}%, STRONG {share['STRONG_DEP']:.1f}%, "
            f"WEAK {share['WEAK_DEP']:.1f}%)"
        )


def _latencies(store: GraphStore, queries: list[str], repeat: int) -> list[float]:
    run: Callable[[str], object] = lambda tool: neighbors(store, [tool], limit=20)  # noqa: E731
    for tool in queries[:50]:
        run(tool)  # warm caches and connections
    timings = []
    for _ in range(repeat):
        for tool in queries:
            started = time.perf_counter_ns()
            run(tool)
            timings.append((time.perf_counter_ns() - started) / 1000)
    return timings


def _percentiles(timings: list[float]) -> tuple[float, float]:
    ordered = sorted(timings)
    return ordered[len(ordered) // 2], ordered[int(len(ordered) * 0.99)]


def bench_traversal(work: Path, sample: int) -> None:
    store, _ = _built_store()
    sources = sorted({edge.src for edge in store.edges()})
    queries = random.Random(7).sample(sources, min(sample, len(sources)))
    local = _latencies(store, queries, repeat=20)
    p50, p99 = _percentiles(local)
    print(
        f"- in-process, one hop, {len(queries)} tools with out-edges: p50 {p50:.1f} µs, "
        f"p99 {p99:.1f} µs ({len(local)} calls)"
    )
    with ArcadeDBServer(work, heap="3g") as server:
        remote = Neo4jStore.from_uri(server.uri)
        started = time.perf_counter()
        remote.upsert_tools(store.list_tools())
        remote.upsert_edges(store.edges())
        print(
            f"- push of {store.count_tools()} tools and {len(store.edges())} edges over Bolt: "
            f"{time.perf_counter() - started:.0f} s"
        )
        same = all(
            neighbors(remote, [tool], limit=20) == neighbors(store, [tool], limit=20)
            for tool in queries
        )
        bolt = _latencies(remote, queries, repeat=1)
        remote.close()
    b50, b99 = _percentiles(bolt)
    print(
        f"- Bolt (ArcadeDB on this machine): p50 {b50:.0f} µs, p99 {b99:.0f} µs; "
        f"ratio p50 {b50 / p50:.0f}x; identical answers: {same}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["import", "graph", "traversal"])
    parser.add_argument("--sample", type=int, default=500, help="traversal queries")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="toolgraph-bench-") as work:
        if args.what == "import":
            bench_import(Path(work))
        elif args.what == "graph":
            bench_graph()
        else:
            bench_traversal(Path(work), args.sample)


if __name__ == "__main__":
    main()
