"""A request's query path, fp32 against the default (short texts on the int8 graph),
interleaved query by query so that the machine's load falls on both alike.

    python -m eval.bench_query_path [--queries 200]

toolbench_stable's 47,425 tools as the catalog, with random unit vectors (latency does
not depend on the values; ``eval.bench_retriever --speed`` times each step alone), and its
first queries, each embedded alone and searched (hybrid, top 10) as the proxy does.
Prints the p50 of the embedding and of query → top-10 for each path and the load
average before and after.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

from eval._bench_speed import PATHS
from eval.retrieval import load_beir
from retriever.documents import corpus_fields, make_document
from retriever.embedder import load_encoder
from retriever.index import ToolIndex


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=Path("../shared/data/toolbench_stable"))
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    data = load_beir(args.corpus)
    documents = [make_document(corpus_fields(row), "enriched") for row in data.corpus]
    vectors = np.random.default_rng(0).standard_normal((len(documents), 384), np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index = ToolIndex(documents, vectors, dense_weight=0.8)
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


if __name__ == "__main__":
    main()
