"""A request's query path, fp32 against the default (short texts on the int8 graph),
interleaved query by query so that the machine's load falls on both alike.

    python -m eval.bench_query_path [--queries 200]

toolbench_stable's 47,425 tools as the catalog, with random unit vectors (latency does
not depend on the values; ``eval.bench_retriever --speed`` times each step alone), and its
first queries, each embedded alone and searched (hybrid, top 10) as the proxy does.
Prints the p50 of the embedding and of query → top-10 for each path and the load
average before and after.

``--rows``: the dense search of a text and its clauses (retriever.clauses), the way it
was (one int8 pass and one rescoring per row, numpy's BLAS on its default threads) against
now (one int8 pass for all rows, BLAS on ``retriever.cpu_threads``), interleaved.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import numpy as np
from threadpoolctl import ThreadpoolController
from tqdm import tqdm

from eval._bench_speed import PATHS
from eval.retrieval import load_beir
from retriever.clauses import query_rows
from retriever.config import RetrieverConfig
from retriever.dense import DenseMatrix
from retriever.documents import corpus_fields, make_document
from retriever.embedder import Vectors, load_encoder
from retriever.index import FUSION_DEPTH, ToolIndex


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=Path("../shared/data/toolbench_stable"))
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rows", action="store_true", help="the clause rows' dense search")
    args = parser.parse_args()
    data = load_beir(args.corpus)
    documents = [make_document(corpus_fields(row), "enriched") for row in data.corpus]
    vectors = np.random.default_rng(0).standard_normal((len(documents), 384), np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index = ToolIndex.from_config(documents, vectors, RetrieverConfig())
    if args.rows:
        compare_rows(index.dense, [q.text for q in data.queries[: args.queries]])
        return
    encoders = {name: load_encoder(PATHS[name]) for name in ("onnx-fp32", "default")}
    times: dict[str, dict[str, list[float]]] = {n: {"embed": [], "top10": []} for n in encoders}
    start_load = os.getloadavg()[0]
    for query in tqdm(data.queries[: args.queries], desc="queries"):
        for name, encoder in encoders.items():
            began = time.perf_counter()
            vector = encoder.encode([query.text])[0]
            embedded = time.perf_counter()
            index.search(vector, query.text, 10, method="hybrid")
            times[name]["embed"].append(1000 * (embedded - began))
            times[name]["top10"].append(1000 * (time.perf_counter() - began))
    print(f"load average {start_load:.2f} -> {os.getloadavg()[0]:.2f}")
    for name, kept in times.items():
        print(
            f"{name:10s} embed p50 {statistics.median(kept['embed']):6.2f} ms   "
            f"query -> top-10 p50 {statistics.median(kept['top10']):6.2f} ms, "
            f"p99 {np.percentile(kept['top10'], 99):6.2f} ms"
        )


def compare_rows(dense: DenseMatrix, texts: list[str]) -> None:
    encoder = load_encoder(PATHS["default"])  # holds BLAS to retriever.cpu_threads
    rows = [query_rows(encoder, text) for text in tqdm(texts, desc="embedding")]
    blas = ThreadpoolController()
    default_threads = os.cpu_count() or 1
    times: dict[str, list[float]] = {"row by row, BLAS default": [], "one pass, BLAS 1": []}
    start_load = os.getloadavg()[0]
    for query in tqdm(rows, desc="queries"):
        with blas.limit(limits=default_threads, user_api="blas"):
            began = time.perf_counter()
            _row_by_row(dense, query, FUSION_DEPTH)
            times["row by row, BLAS default"].append(1000 * (time.perf_counter() - began))
        began = time.perf_counter()
        dense.search(query, FUSION_DEPTH)
        times["one pass, BLAS 1"].append(1000 * (time.perf_counter() - began))
    print(f"load average {start_load:.2f} -> {os.getloadavg()[0]:.2f}")
    print(f"rows per text: mean {np.mean([len(r) for r in rows]):.2f}")
    for name, kept in times.items():
        print(f"{name:26s} dense search p50 {statistics.median(kept):6.2f} ms")


def _row_by_row(dense: DenseMatrix, rows: Vectors, k: int) -> list[tuple[int, float]]:
    """The search as it was: each row's own top ``k``, then each tool's best score."""
    best: dict[int, float] = {}
    for row in rows:
        for i, score in dense.search(row, k):
            best[i] = max(score, best.get(i, -np.inf))
    return sorted(best.items(), key=lambda item: -item[1])[:k]


if __name__ == "__main__":
    main()
