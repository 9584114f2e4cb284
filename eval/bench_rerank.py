"""What the reranker and the expanded documents cost on this machine's CPU.

* the reranker's added time for one request over 30 candidates whose token vectors are
  kept (the steady state: a catalog's tools are read once): the query's pass and MaxSim;
* the same with the 30 candidates' token vectors computed in the request (a cold tool);
* expansion: writing the questions of 1,000 tools and embedding them.

Queries and tools are toolbench_stable's; p50 and p90 over ``--queries`` requests, one
onnxruntime thread each (``retriever.cpu_threads``), the load average before and after::

    python -m eval.bench_rerank --json eval/results/bench_rerank.json
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import time
from pathlib import Path

import numpy as np

from eval.data_folder import dataset
from retriever.config import RetrieverConfig
from retriever.documents import corpus_fields, make_document
from retriever.embedder import load_encoder
from retriever.expansion import _write
from retriever.index import RERANK_DEPTH
from retriever.rerank import load_reranker
from retriever.rerank.reranker import Reranker


def _ms(samples: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(1000 * float(np.percentile(samples, 50)), 2),
        "p90_ms": round(1000 * float(np.percentile(samples, 90)), 2),
    }


def _agreement(
    reranker: Reranker, queries: list[str], texts: list[str], rng: random.Random
) -> dict[str, float]:
    """How far the int8 graph's order over 30 candidates is from the fp32 graph's."""
    exact = Reranker(
        reranker.model,
        reranker.weights,
        reranker.encoder.file.parent,
        first_stage_weight=0.0,
        precision="fp32",
    )
    same_top1, same_top5, gaps = [], [], []
    for query in queries:
        picked = rng.sample(texts, RERANK_DEPTH)
        quick, slow = reranker.scores(query, picked), exact.scores(query, picked)
        same_top1.append(int(np.argmax(quick)) == int(np.argmax(slow)))
        same_top5.append(set(np.argsort(-quick)[:5]) == set(np.argsort(-slow)[:5]))
        gaps.append(float(np.abs(quick - slow).max()))
    return {
        "same_top1": round(float(np.mean(same_top1)), 3),
        "same_top5_set": round(float(np.mean(same_top5)), 3),
        "max_score_gap_p50": round(float(np.median(gaps)), 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=dataset("toolbench_stable"))
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--tools", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = []
    with gzip.open(args.data / "corpus.jsonl.gz", "rt", encoding="utf-8") as lines:
        for i, line in enumerate(lines):
            if i >= 20 * args.tools:
                break
            rows.append(json.loads(line))
    rng = random.Random(0)
    rows = rng.sample(rows, args.tools)
    fields = [corpus_fields(r) for r in rows]
    texts = [make_document(f).text for f in fields]
    queries = [
        json.loads(line)["text"]
        for line in (args.data / "queries.jsonl").read_text().splitlines()[: args.queries]
    ]
    config = RetrieverConfig(
        rerank=True, cpu_threads=args.threads, onnx_dir=Path(".cache/retriever/onnx")
    )
    reranker = load_reranker(config)
    assert reranker is not None
    load_before = os.getloadavg()
    warm, cold = [], []
    for query in queries:
        picked = rng.sample(texts, RERANK_DEPTH)
        started = time.perf_counter()
        reranker.combined(query, picked, [0.5] * RERANK_DEPTH)
        cold.append(time.perf_counter() - started)  # first sight of most of these tools
        started = time.perf_counter()
        reranker.combined(query + " ", picked, [0.5] * RERANK_DEPTH)
        warm.append(time.perf_counter() - started)
    embed = []
    encoder = load_encoder(RetrieverConfig(cpu_threads=args.threads))
    for query in queries:  # the first stage's own query pass, for scale (same run)
        started = time.perf_counter()
        encoder.encode([query + "  "])
        embed.append(time.perf_counter() - started)
    agreement = _agreement(reranker, queries, texts, rng)
    started = time.perf_counter()
    written = [_write(f) for f in fields]
    write_s = time.perf_counter() - started
    flat = [q for qs in written for q in qs]
    started = time.perf_counter()
    for i in range(0, len(flat), 32):
        encoder.encode(flat[i : i + 32])
    embed_s = time.perf_counter() - started
    report = {
        "rerank_30_kept": _ms(warm),
        "rerank_30_cold": _ms(cold),
        "first_stage_query_embedding": _ms(embed),
        "int8_vs_fp32": agreement,
        "expansion_per_1000_tools": {
            "write_s": round(1000 * write_s / len(fields), 3),
            "embed_s": round(1000 * embed_s / len(fields), 1),
            "questions_per_tool": round(len(flat) / len(fields), 2),
        },
        "threads": args.threads,
        "load_average": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
    }
    print(json.dumps(report, indent=2))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
