"""Before and after of issue 15 in one run (``python -m eval.bench_retriever --speed``):
the query embedding on torch and on onnxruntime at each precision, the dense search exact
and through the int8 copy, query -> top-10 both ways, the recall the compression costs,
and NDCG@5 on toolbench_stable with each query path."""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from eval.retrieval import BeirSet, ndcg_at
from retriever.bulk import DiskCache, embed_documents, text_key
from retriever.clauses import query_rows, split_clauses
from retriever.config import RetrieverConfig
from retriever.documents import ToolDocument
from retriever.embedder import Encoder, Vectors, load_encoder
from retriever.index import ToolIndex

Timer = Callable[[list[Callable[[], object]]], dict[str, float]]

#: The query paths compared: torch (before), onnxruntime with one graph at each precision,
#: and the default (fp32 documents, short texts such as a query on the int8 graph).
PATHS = {
    "torch": RetrieverConfig(device="cpu", runtime="torch"),
    **{
        f"onnx-{precision}": RetrieverConfig(
            device="cpu",
            runtime="onnx",
            onnx_precision=precision,
            onnx_query_precision=precision,
        )
        for precision in ("fp32", "fp16", "int8")
    },
    "default": RetrieverConfig(device="cpu", runtime="onnx"),
}


def speed(
    documents: list[ToolDocument],
    vectors: Vectors,
    texts: list[str],
    timed: Timer,
    config: RetrieverConfig,
) -> dict[str, Any]:
    """Latency of each path and each search, interleaved in one process."""
    out: dict[str, Any] = {"load_average_1m_at_start": round(os.getloadavg()[0], 2)}
    encoders = {name: load_encoder(config) for name, config in PATHS.items()}
    for name, encoder in encoders.items():
        out[f"embed_query_batch1_{name}"] = timed([partial(encoder.encode, [t]) for t in texts])
    exact = ToolIndex.from_config(documents, vectors, config)
    exact.dense = type(exact.dense)(vectors, compress=False)
    compressed = ToolIndex.from_config(documents, vectors, config)
    query_vectors = encoders["onnx-fp32"].encode(texts)
    pairs = list(zip(texts, query_vectors, strict=True))
    for label, index in (("exact", exact), ("int8", compressed)):
        out[f"search_dense_{label}"] = timed(
            [partial(index.search, v, "", 10, method="dense") for _, v in pairs]
        )
        out[f"search_hybrid_{label}"] = timed(
            [partial(index.search, v, t, 10, method="hybrid") for t, v in pairs]
        )
    out["search_bm25_alone"] = timed([partial(exact.bm25.scores, t) for t in texts])  # type: ignore[union-attr]
    out["query_to_top10_hybrid_before_torch_exact"] = timed(
        [partial(_end_to_end, encoders["torch"], exact, t) for t in texts]
    )
    out["query_to_top10_hybrid_after_onnx_fp32_int8"] = timed(
        [partial(_end_to_end, encoders["onnx-fp32"], compressed, t) for t in texts]
    )
    out["query_to_top10_hybrid_default_int8_query"] = timed(
        [partial(_end_to_end, encoders["default"], compressed, t) for t in texts]
    )
    # The shipped path reads a text's clauses too (retriever.clauses): one more short pass
    # and one more row of the dense search per clause.
    out["query_to_top10_hybrid_default_with_clauses"] = timed(
        [partial(_end_to_end_rows, encoders["default"], compressed, t) for t in texts]
    )
    out["query_rows_mean"] = round(float(np.mean([1 + len(split_clauses(t)) for t in texts])), 2)
    out["recall@10_int8_vs_exact_dense"] = _recall(exact, compressed, query_vectors, 10)
    out["recall@100_int8_vs_exact_dense"] = _recall(exact, compressed, query_vectors, 100)
    out["vectors_min_cosine_vs_torch"] = _cosines(encoders, texts)
    out["load_average_1m_at_end"] = round(os.getloadavg()[0], 2)
    return out


def quality(
    data: BeirSet, documents: list[ToolDocument], cache_dir: Path, limit: int | None = None
) -> dict[str, Any]:
    """NDCG@5 (dense and hybrid) with each query path, over the documents whose vectors are
    cached (every relevant one and a sample of the rest, with the cached fp32 vectors)."""
    base = load_encoder(PATHS["onnx-fp32"])
    cached = DiskCache(cache_dir, base.name.split("+")[0]).vectors
    kept = [d for d in documents if text_key(d.text) in cached]
    doc_vectors = embed_documents(base, [d.text for d in kept], cache_dir=cache_dir)
    index = ToolIndex.from_config(kept, doc_vectors, RetrieverConfig())
    ids = {d.id for d in kept}
    queries = [q for q in data.queries if set(data.qrels[q.id]) <= ids][:limit]
    out: dict[str, Any] = {"documents": len(kept), "queries": len(queries)}
    if not queries:
        # A fresh machine caches no document vectors: the latency figures stand alone.
        out["skipped"] = f"no query has all its relevant tools' vectors cached in {cache_dir}"
        return out
    for name, config in PATHS.items():
        encoder = load_encoder(config)
        vectors = np.concatenate(
            [
                encoder.encode([q.text for q in queries[i : i + 64]])
                for i in range(0, len(queries), 64)
            ]
        )
        for method in ("dense", "hybrid"):
            scores = [
                ndcg_at(
                    [h.id for h in index.search(v, q.text, 5, method=method)], data.qrels[q.id], 5
                )
                for q, v in zip(queries, vectors, strict=True)
            ]
            out[f"ndcg@5_{method}_{name}"] = round(100 * float(np.mean(scores)), 2)
    return out


def _end_to_end(encoder: Encoder, index: ToolIndex, text: str) -> object:
    return index.search(encoder.encode([text])[0], text, 10, method="hybrid")


def _end_to_end_rows(encoder: Encoder, index: ToolIndex, text: str) -> object:
    return index.search(query_rows(encoder, text), text, 10, method="hybrid")


def _recall(exact: ToolIndex, compressed: ToolIndex, queries: Vectors, k: int) -> float:
    found = []
    for query in queries:
        truth = {h.id for h in exact.search(query, "", k, method="dense")}
        got = {h.id for h in compressed.search(query, "", k, method="dense")}
        found.append(len(truth & got) / max(1, len(truth)))
    return round(float(np.mean(found)), 4)


def _cosines(encoders: dict[str, Encoder], texts: list[str]) -> dict[str, float]:
    reference = encoders["torch"].encode(texts)
    return {
        name: round(float((encoder.encode(texts) * reference).sum(axis=1).min()), 5)
        for name, encoder in encoders.items()
        if name != "torch"
    }


def plot(results: dict[str, Any], out: Path) -> None:
    """p50 of each step before and after, as horizontal bars (log scale)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [
        (key, value["p50_ms"])
        for key, value in results.items()
        if isinstance(value, dict) and "p50_ms" in value
    ]
    figure, axes = plt.subplots(figsize=(8, 0.4 * len(rows) + 1.2))
    axes.barh([r[0] for r in rows][::-1], [r[1] for r in rows][::-1], color="#4c72b0")
    axes.set_xscale("log")
    axes.set_xlabel("p50 ms (log scale)")
    start, end = results["load_average_1m_at_start"], results["load_average_1m_at_end"]
    axes.set_title(f"retrieval on 2 shared cores, load {start}-{end}")
    figure.tight_layout()
    figure.savefig(out, dpi=110)
