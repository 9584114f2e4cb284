"""What clause-split search (``retriever.clauses``) adds to select mode's search step,
with it off and on, interleaved request by request so that the machine's load falls on
both alike.

    python -m eval.bench_clauses [--tools 300] [--requests 100] [--catalog]

Select mode's ranking of a client's own tools (:meth:`retriever.select.ToolSelector.select`:
the query's pass, each tool scored, the few kept), built as the proxy builds it (the
default encoder, the micro-batcher at its default window, an in-process cache), over the
first ``--tools`` APIs of toolbench_stable in OpenAI's format, embedded once beforehand
as a client that sends the same tools every turn has them. Each request is new text (a
number in it changes), so no query is answered from the cache: a one-clause request
("What's the weather forecast in Lisbon for day 17?") and a three-clause one (that, "and
also translate ... into Portuguese", "Then send ... to my phone"). Prints the p50 and p90
of the step for each, off and on, the texts the encoder ran per request (its own
counters), and the load average before and after.

``--catalog`` times orchestrate mode's catalog search too, as a root sub-task's: the
planner's encoder (through the memory of recent texts) and
:meth:`proxy.plan.candidates.CandidateFinder.retrieve`'s top 10 over toolbench_stable's
47,425 tools, with random unit vectors as the tools' (latency does not depend on the
values; ``eval.bench_query_path`` does the same), the same requests, off and on.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from typing import Any

from eval.bench_first_select import CORPUS, client_tools
from retriever.batching import BatchingEmbedder
from retriever.cache import LRUCache
from retriever.config import RetrieverConfig
from retriever.embedder import load_encoder
from retriever.select import SelectOptions, ToolSelector

ONE = "What's the weather forecast in Lisbon for day {i}?"
THREE = (
    "What's the weather forecast in Lisbon for day {i}, and also translate 'good morning "
    "number {i}' into Portuguese. Then send the forecast for day {i} to my phone."
)
SHAPES = {"one clause": ONE, "three clauses": THREE}


Arm = tuple[str, bool]  # (request shape, retriever.clauses on)


async def measure(tools: int, requests: int) -> tuple[dict[Arm, list[float]], dict[Arm, int]]:
    """Milliseconds of each request's select step, and the texts the encoder ran for one
    request (the same for every request of an arm), by arm."""
    config = RetrieverConfig()
    encoder = load_encoder(config)
    embedder = BatchingEmbedder(
        encoder,
        LRUCache(config.cache_size),
        window_ms=config.batch_window_ms,
        max_batch=config.max_batch,
    )
    selectors = {
        on: ToolSelector(embedder, config.model_copy(update={"clauses": on}))
        for on in (False, True)
    }
    offered = client_tools(tools)
    options = SelectOptions(config.select_top_k, config.select_threshold)
    texts: dict[Arm, list[int]] = {}
    took: dict[Arm, list[float]] = {}
    try:
        await selectors[False].select(offered, _user("warm up"), options)  # tools embedded
        for i in range(requests):
            for shape, template in SHAPES.items():
                for on, selector in selectors.items():
                    # Each arm its own numbers: no text is embedded twice.
                    text = template.format(i=4 * i + 2 * list(SHAPES).index(shape) + on)
                    before = encoder.counts.texts
                    started = time.perf_counter()
                    await selector.select(offered, _user(text), options)
                    took.setdefault((shape, on), []).append(1000 * (time.perf_counter() - started))
                    texts.setdefault((shape, on), []).append(encoder.counts.texts - before)
    finally:
        embedder.close()
    for arm, counts in texts.items():
        assert len(set(counts)) == 1, (arm, set(counts))
    return took, {arm: counts[0] for arm, counts in texts.items()}


def measure_catalog(requests: int) -> tuple[dict[Arm, list[float]], dict[Arm, int]]:
    """Milliseconds of a root sub-task's search (its text embedded, the top 10 found) over
    toolbench_stable's catalog, and the texts embedded per request, by arm."""
    import numpy as np

    from eval.retrieval import load_beir
    from graph_store.memory import InProcessStore
    from proxy.plan.candidates import CandidateFinder
    from retriever.documents import corpus_fields, make_document
    from retriever.index import ToolIndex
    from retriever.recent import remembering

    config = RetrieverConfig()
    data = load_beir(CORPUS)
    documents = [make_document(corpus_fields(row), config.document) for row in data.corpus]
    vectors = np.random.default_rng(0).standard_normal((len(documents), 384), np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index = ToolIndex.from_config(documents, vectors, config)
    encoder = remembering(load_encoder(config))
    finders = {
        on: CandidateFinder(InProcessStore(), index, clauses=encoder if on else None)
        for on in (False, True)
    }
    texts: dict[Arm, list[int]] = {}
    took: dict[Arm, list[float]] = {}
    for i in range(requests):
        for shape, template in SHAPES.items():
            for on, finder in finders.items():
                text = template.format(i=4 * i + 2 * list(SHAPES).index(shape) + on)
                before = encoder.counts.texts
                started = time.perf_counter()
                finder.retrieve(text, encoder.encode([text])[0], 10)
                took.setdefault((shape, on), []).append(1000 * (time.perf_counter() - started))
                texts.setdefault((shape, on), []).append(encoder.counts.texts - before)
    for arm, counts in texts.items():
        assert len(set(counts)) == 1, (arm, set(counts))
    return took, {arm: counts[0] for arm, counts in texts.items()}


def _table(title: str, took: dict[Arm, list[float]], texts: dict[Arm, int]) -> None:
    print(f"\n{title}\n")
    print("| request | retriever.clauses | texts embedded | p50 ms | p90 ms |")
    print("|---|---|---:|---:|---:|")
    for shape in SHAPES:
        for on in (False, True):
            times = sorted(took[(shape, on)])
            p90 = times[int(0.9 * (len(times) - 1))]
            print(
                f"| {shape} | {'on' if on else 'off'} | {texts[(shape, on)]} | "
                f"{statistics.median(times):.2f} | {p90:.2f} |"
            )


def _user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tools", type=int, default=300)
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--catalog", action="store_true", help="orchestrate's catalog too")
    args = parser.parse_args(argv)
    command = f"python -m eval.bench_clauses --tools {args.tools} --requests {args.requests}"
    print(command + (" --catalog" if args.catalog else ""))
    print(f"load average at start: {_load()}")
    took, texts = asyncio.run(measure(args.tools, args.requests))
    _table(f"select mode, {args.tools} client tools (the select step)", took, texts)
    if args.catalog:
        took, texts = measure_catalog(args.requests)
        _table("orchestrate's catalog, a root sub-task's search (embed + top 10)", took, texts)
    print(f"\nload average at end: {_load()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
