"""Latency of the retriever over the full toolbench_stable catalog (47,425 APIs).

Measures, one query at a time with the default model on CPU: the query embedding,
the in-process search alone (exact dense; dense + BM25 fused), the whole
query → top-10, and Qdrant local mode's search over the same vectors (without and
with a category filter) as a ratio; then queries/s for 64 concurrent queries with
and without micro-batching. Document vectors come from the disk cache that
``toolgraph eval retrieval`` fills (they are embedded first when missing).

    python -m eval.bench_retriever --corpus ../shared/data/toolbench_stable \\
        --cache-dir .cache/retriever/embeddings --json eval/results/retriever_latency.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from qdrant_client import QdrantClient

from eval.data_folder import dataset
from eval.retrieval import BeirSet, load_beir
from retriever.batching import BatchingEmbedder
from retriever.bulk import cached_vectors, embed_documents
from retriever.cache import LRUCache
from retriever.config import RetrieverConfig
from retriever.conversation import conversation_query
from retriever.documents import ToolDocument, corpus_fields, make_document
from retriever.embedder import Encoder, Vectors, load_encoder
from retriever.index import Method, ToolIndex
from retriever.metrics import ndcg_at
from retriever.owned_client import OwnedClient
from retriever.qdrant_store import QdrantCatalog


def percentiles(samples_s: list[float]) -> dict[str, float]:
    ms = np.asarray(samples_s) * 1000
    return {
        "p50_ms": round(float(np.percentile(ms, 50)), 3),
        "p99_ms": round(float(np.percentile(ms, 99)), 3),
        "mean_ms": round(float(ms.mean()), 3),
        "n": len(samples_s),
    }


def timed(calls: list[Callable[[], object]], warmup: int = 5) -> dict[str, float]:
    for call in calls[:warmup]:
        call()
    samples = []
    for call in calls:
        started = time.perf_counter()
        call()
        samples.append(time.perf_counter() - started)
    return percentiles(samples)


def throughput(encoder: Encoder, texts: list[str], window_ms: float, max_batch: int) -> float:
    """Queries/s when ``texts`` arrive 64 at a time, each its own request."""
    concurrency = 64

    async def run() -> float:
        embedder = BatchingEmbedder(encoder, LRUCache(0), window_ms=window_ms, max_batch=max_batch)
        started = time.perf_counter()
        for start in range(0, len(texts), concurrency):
            batch = texts[start : start + concurrency]
            await asyncio.gather(*(embedder.embed([text]) for text in batch))
        embedder.close()
        return len(texts) / (time.perf_counter() - started)

    return round(asyncio.run(run()), 1)


FOLLOW_UP = "Thanks. And can you do the same again for next week?"


def follow_up_quality(encoder: Encoder, index: ToolIndex, data: BeirSet) -> dict[str, float]:
    """NDCG@5 (hybrid) when every query is followed by a turn with no tool words in it,
    and the search query is that last turn alone or the recent user turns."""
    out = {}
    for turns in (1, 3):
        queries = [
            conversation_query(
                [
                    {"role": "user", "content": q.text},
                    {"role": "assistant", "content": "Done."},
                    {"role": "user", "content": FOLLOW_UP},
                ],
                turns,
            )
            for q in data.queries
        ]
        vectors = np.concatenate(
            [encoder.encode(queries[i : i + 64]) for i in range(0, len(queries), 64)]
        )
        scores = [
            ndcg_at([h.id for h in index.search(v, text, 5)], data.qrels[q.id], 5)
            for q, text, v in zip(data.queries, queries, vectors, strict=True)
        ]
        out[f"last_{turns}_user_turns"] = round(100 * float(np.mean(scores)), 1)
    return out


def document_vectors(
    encoder: Encoder, documents: list[ToolDocument], cache_dir: Path, fill: bool
) -> tuple[Vectors, int]:
    """Every document's vector; with ``fill``, the cached ones and a random unit vector
    for each of the others (counted), else the others embedded now."""
    texts = [d.text for d in documents]
    if not fill:
        return embed_documents(encoder, texts, cache_dir=cache_dir), 0
    rng = np.random.default_rng(0)
    rows, filled = [], 0
    for vector in cached_vectors(encoder, texts, cache_dir):
        if vector is None:
            vector = rng.standard_normal(encoder.dim).astype(np.float32)
            vector /= np.linalg.norm(vector)
            filled += 1
        rows.append(vector)
    return np.stack(rows).astype(np.float32), filled


def end_to_end(encoder: Encoder, index: ToolIndex, text: str, method: Method) -> object:
    return index.search(encoder.encode([text])[0], text, 10, method=method)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=dataset("toolbench_stable"))
    parser.add_argument("--cache-dir", type=Path, default=Path(".cache/retriever/embeddings"))
    parser.add_argument("--json", type=Path, default=Path("eval/results/retriever_latency.json"))
    parser.add_argument("--queries", type=int, default=300, help="queries timed per figure")
    parser.add_argument(
        "--fill-missing",
        action="store_true",
        help="random unit vectors for documents not in the cache (latency does not depend on "
        "the values)",
    )
    parser.add_argument(
        "--follow-up-only", action="store_true", help="measure the follow-up queries only"
    )
    args = parser.parse_args()

    data = load_beir(args.corpus)
    encoder = load_encoder(RetrieverConfig(device="cpu", cpu_threads=1))
    documents = [make_document(corpus_fields(row), "enriched") for row in data.corpus]
    if args.follow_up_only:
        vectors = embed_documents(encoder, [d.text for d in documents], cache_dir=args.cache_dir)
        follow_up = follow_up_quality(encoder, ToolIndex(documents, vectors), data)
        args.json.write_text(json.dumps({"follow_up_ndcg@5": follow_up}, indent=2) + "\n")
        print(follow_up)
        return
    vectors, filled = document_vectors(encoder, documents, args.cache_dir, args.fill_missing)
    index = ToolIndex(documents, vectors)
    texts = [q.text for q in data.queries][: args.queries]
    query_vectors = encoder.encode(texts[:64])
    query_vectors = np.concatenate(
        [query_vectors, *(encoder.encode(texts[i : i + 64]) for i in range(64, len(texts), 64))]
    )
    category = max(set(d.category for d in documents), key=[d.category for d in documents].count)
    pairs = list(zip(texts, query_vectors, strict=True))

    results: dict[str, Any] = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, shared with other test runs",
        "catalog": f"{len(documents)} tools x {encoder.dim}",
        "model": encoder.name,
        "torch_threads": 1,
        "load_average_1m_at_start": round(os.getloadavg()[0], 2),
    }
    results["embed_query_batch1"] = timed([partial(encoder.encode, [t]) for t in texts])
    results["search_dense_exact"] = timed(
        [partial(index.search, v, "", 10, method="dense") for _, v in pairs]
    )
    results["search_dense_exact_category_filter"] = timed(
        [partial(index.search, v, "", 10, method="dense", category=category) for _, v in pairs]
    )
    results["search_hybrid"] = timed(
        [partial(index.search, v, t, 10, method="hybrid") for t, v in pairs]
    )
    results["query_to_top10_hybrid"] = timed(
        [partial(end_to_end, encoder, index, t, "hybrid") for t in texts]
    )
    results["query_to_top10_dense"] = timed(
        [partial(end_to_end, encoder, index, t, "dense") for t in texts]
    )

    client = OwnedClient(QdrantClient(":memory:"))  # local mode, without the disk writes
    catalog = QdrantCatalog(client, "bench", encoder.dim)
    by_text = {doc.text: vectors[i] for i, doc in enumerate(documents)}
    catalog.sync(documents, lambda batch: np.stack([by_text[text] for text in batch]))
    results["qdrant_local_search"] = timed([partial(catalog.search, v, 10) for _, v in pairs])
    # Local mode scans with a filter in Python: about a second a query at this size.
    results["qdrant_local_search_category_filter"] = timed(
        [partial(catalog.search, v, 10, category=category) for _, v in pairs[:30]], warmup=2
    )
    results["filter_category"] = category
    ours = results["search_dense_exact"]["p50_ms"]
    results["qdrant_over_exact_p50"] = round(results["qdrant_local_search"]["p50_ms"] / ours, 1)
    results["qdrant_over_exact_p50_filtered"] = round(
        results["qdrant_local_search_category_filter"]["p50_ms"]
        / results["search_dense_exact_category_filter"]["p50_ms"],
        1,
    )
    results["random_vectors_for_missing_documents"] = filled
    many = (texts * 2)[:256]
    results["queries_per_s_64_concurrent_batched_2ms"] = throughput(encoder, many, 2.0, 64)
    results["queries_per_s_64_concurrent_one_pass_each"] = throughput(encoder, many, 0.0, 1)
    results["load_average_1m_at_end"] = round(os.getloadavg()[0], 2)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
