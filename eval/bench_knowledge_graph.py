"""Per-call latency of each knowledge-graph-pack tool on a graph of a million triples.

    python -m eval.bench_knowledge_graph                 # 110,000 people: ~1.0 M triples
    python -m eval.bench_knowledge_graph --people 5000 --calls 3   # a quick look

Generates (seeded) a graph of people, companies, cities and countries as N-Triples
in a temporary folder (never kept): each person has a name, a city (``livesIn``), an
employer (``worksFor``), three acquaintances (``knows``), an age, a salary and a
birth date. Three hub cities hold 10 % of the people each, past the pack's
``max_entities`` (10,000), so their sets come back truncated; one hub company
employs 5 % of them. The file is loaded into the embedded Oxigraph store (the
pack's default) through the pack itself, and each tool's in-process function is
called ``--calls`` times inside one request's variables (the first call of all,
which loads the graph, is timed apart); p50 and p95 in milliseconds per tool, the
load average before and after. Results: a table here and
``eval/results/bench_knowledge_graph.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from pydantic import JsonValue
from tqdm import tqdm

from proxy.config import KnowledgeGraphPackSettings
from proxy.tools.builtin import PythonTool
from proxy.tools.packs.knowledge_graph.catalog import KnowledgeGraphPack
from proxy.tools.variables import Variables, bound_variables

RESULTS = Path(__file__).resolve().parent / "results"
NS = "http://example.org/bench/"
LABEL = "<http://www.w3.org/2000/01/rdf-schema#label>"
_INT = "^^<http://www.w3.org/2001/XMLSchema#integer>"
_DATE = "^^<http://www.w3.org/2001/XMLSchema#date>"
HUB_CITIES = 3  # City 0000-0002: 10 % of the people each
HUB_SHARE = 0.10
HUB_COMPANY_SHARE = 0.05  # Company 00000's employees


def person(i: int) -> str:
    return f"Person {i:06d}"


def node(kind: str, i: int) -> str:
    return f"<{NS}{kind}{i}>"


def relation(name: str) -> str:
    return NS + name


def triples(people: int, seed: int = 7) -> Iterator[str]:
    """The graph as N-Triples lines: people, then companies, cities, countries."""
    rng = random.Random(seed)
    companies, cities, countries = max(people // 22, 2), max(people // 110, HUB_CITIES + 1), 20
    for i in range(people):
        yield from _person(rng, i, people, companies, cities)
    for c in range(companies):
        yield from _thing(node("company", c), f"Company {c:05d}")
        yield f"{node('company', c)} <{relation('locatedIn')}> {node('city', c % cities)} ."
        yield f'{node("company", c)} <{relation("founded")}> "{rng.randrange(1850, 2024)}"{_INT} .'
    for c in range(cities):
        yield from _thing(node("city", c), f"City {c:04d}")
        yield f"{node('city', c)} <{relation('inCountry')}> {node('country', c % countries)} ."
        yield f'{node("city", c)} <{relation("population")}> "{rng.randrange(10**6)}"{_INT} .'
    for c in range(countries):
        yield from _thing(node("country", c), f"Country {c:02d}")


def _thing(subject: str, name: str) -> Iterator[str]:
    yield f'{subject} {LABEL} "{name}" .'


def _person(rng: random.Random, i: int, people: int, companies: int, cities: int) -> Iterator[str]:
    me = node("person", i)
    draw = rng.random()
    city = int(draw / HUB_SHARE) if draw < HUB_CITIES * HUB_SHARE else rng.randrange(cities)
    company = 0 if rng.random() < HUB_COMPANY_SHARE else rng.randrange(companies)
    yield from _thing(me, person(i))
    yield f"{me} <{relation('livesIn')}> {node('city', city)} ."
    yield f"{me} <{relation('worksFor')}> {node('company', company)} ."
    for friend in rng.sample(range(people), 3):
        yield f"{me} <{relation('knows')}> {node('person', friend)} ."
    yield f'{me} <{relation("age")}> "{rng.randrange(18, 90)}"{_INT} .'
    yield f'{me} <{relation("salary")}> "{rng.randrange(20_000, 200_000)}"{_INT} .'
    day = f"{rng.randrange(1935, 2007)}-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}"
    yield f'{me} <{relation("born")}> "{day}"{_DATE} .'


def write_graph(path: Path, people: int) -> int:
    """Write the graph to ``path``; the number of triples."""
    written = 0
    with path.open("w", encoding="utf-8") as out:
        for line in tqdm(triples(people), desc="triples", unit=" t", unit_scale=True):
            out.write(line + "\n")
            written += 1
    return written


Call = tuple[str, str, dict[str, JsonValue]]


def calls(rng: random.Random, people: int, sets: tuple[str, str]) -> Iterator[Call]:
    """One round of (label, tool, arguments); ``sets``: the variables :func:`prepare`
    made, a hub city's residents (cut at max_entities) and the hub company's staff."""
    hub, one = f"{NS}city0", f"{NS}person{rng.randrange(people)}"
    residents, staff = sets
    yield "find_entities (exact name)", "find_entities", {"name": person(rng.randrange(people))}
    yield "find_entities (part of names)", "find_entities", {"name": "company 001"}
    yield "get_relations (one entity)", "get_relations", {"variable": one}
    yield "get_relations (hub city)", "get_relations", {"variable": hub}
    yield "get_relations (residents)", "get_relations", {"variable": residents}
    yield "get_neighbors (hub: ^livesIn)", "get_neighbors", {
        "variable": hub, "relation": "^" + relation("livesIn")}  # fmt: skip
    yield "get_neighbors (residents: worksFor)", "get_neighbors", {
        "variable": residents, "relation": relation("worksFor")}  # fmt: skip
    yield "get_attributes (residents)", "get_attributes", {"variable": residents}
    yield (
        "argmax (residents: salary)",
        "argmax",
        {"variable": residents, "attribute": relation("salary")},
    )
    yield (
        "argmin (residents: born)",
        "argmin",
        {"variable": residents, "attribute": relation("born")},
    )
    yield "intersection (residents, staff)", "intersection", {
        "variable1": residents, "variable2": staff}  # fmt: skip
    yield "count (residents)", "count", {"variable": residents}


async def prepare(functions: dict[str, PythonTool]) -> tuple[float, tuple[str, str]]:
    """The seconds of the first call (which loads the graph) and the variables holding
    hub city 0's residents and hub company 0's staff."""
    started = time.perf_counter()
    await functions["bench_find_entities"]({"name": "City 0000"})  # loads the graph
    loaded = time.perf_counter() - started
    inverse = "^" + relation("livesIn")
    residents = await functions["bench_get_neighbors"](
        {"variable": f"{NS}city0", "relation": inverse}
    )
    staff = await functions["bench_get_neighbors"](
        {"variable": f"{NS}company0", "relation": "^" + relation("worksFor")}
    )
    assert isinstance(residents, dict)
    assert isinstance(staff, dict)
    return loaded, (str(residents["variable"]), str(staff["variable"]))


async def measure(path: Path, people: int, args: argparse.Namespace) -> dict[str, JsonValue]:
    settings = KnowledgeGraphPackSettings(
        name="bench", path=path, timeout=args.timeout, max_entities=args.max_entities
    )
    pack = KnowledgeGraphPack.open([settings])
    functions = pack.functions()
    times: dict[str, list[float]] = {}
    answers: dict[str, JsonValue] = {}
    rng = random.Random(11)
    try:
        with bound_variables(Variables()):
            first, sets = await prepare(functions)
            for _ in tqdm(range(args.calls), desc="rounds"):
                for label, tool, arguments in calls(rng, people, sets):
                    started = time.perf_counter()
                    answers[label] = await functions[f"bench_{tool}"](arguments)
                    times.setdefault(label, []).append((time.perf_counter() - started) * 1000)
    finally:
        await pack.aclose()
    return {
        "first_call_loading_s": first,
        "p50_ms": {label: statistics.median(ms) for label, ms in times.items()},
        "p95_ms": {label: _p95(ms) for label, ms in times.items()},
        "answer_shape": {label: _shape(answer) for label, answer in answers.items()},
    }


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def _shape(answer: JsonValue) -> JsonValue:
    """What a call gave back, without the entities: count, truncated, how many listed."""
    if not isinstance(answer, dict):
        return None
    shape: dict[str, JsonValue] = {
        key: answer[key] for key in ("count", "truncated", "at_least", "value") if key in answer
    }
    for key in ("relations", "attributes"):
        if isinstance(listed := answer.get(key), list | dict):
            shape[key] = len(listed)
    return shape


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m eval.bench_knowledge_graph", description=__doc__
    )
    parser.add_argument("--people", type=int, default=110_000)
    parser.add_argument("--calls", type=int, default=30, help="calls of each tool")
    parser.add_argument("--max-entities", type=int, default=10_000, help="a variable's cap")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds a query may run")
    parser.add_argument("--out", type=Path, default=RESULTS / "bench_knowledge_graph.json")
    args = parser.parse_args(argv)
    if args.people < 100 or args.calls < 1:
        parser.error("--people must be at least 100 and --calls at least 1")
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="toolgraph-kg-bench-") as folder:
        path = Path(folder) / "bench.nt"
        started = time.monotonic()
        count = write_graph(path, args.people)
        print(f"{count:,} triples written in {time.monotonic() - started:.0f} s")
        result = asyncio.run(measure(path, args.people, args))
    report: dict[str, JsonValue] = {
        "triples": count,
        "people": args.people,
        "calls": args.calls,
        "max_entities": args.max_entities,
        "load_average_before": list(load_before),
        "load_average_after": list(os.getloadavg()),
        "machine": platform.platform(),
        **result,
    }
    print_table(report)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


def print_table(report: dict[str, JsonValue]) -> None:
    p50, p95, shape = report["p50_ms"], report["p95_ms"], report["answer_shape"]
    assert isinstance(p50, dict)
    assert isinstance(p95, dict)
    assert isinstance(shape, dict)
    print("| tool (arguments) | p50 ms | p95 ms | answer |\n| --- | --- | --- | --- |")
    for label in p50:
        print(f"| `{label}` | {p50[label]:,.0f} | {p95[label]:,.0f} | {shape[label]} |")


if __name__ == "__main__":
    raise SystemExit(main())
