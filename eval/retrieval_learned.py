"""Learned retrieval, measured as a reviewer would: whole datasets left out.

Two stages, both on the frozen MiniLM's cached vectors (an adapter only maps them):

* ``--lodo``: for each of the eight training sets (../shared/data/train), every
  adapter variant is trained on the other seven and scored on the one left out, with
  each fusion weight. The variant and the weight with the best mean NDCG@5 over the
  held-out sets are the shipped default; nothing else picks them.
* ``--unseen``: the chosen variant trained on all eight, scored on toolbench_stable and
  Seal-Tools (never used to choose anything), next to BM25 and the old hybrid.

Results go to one JSON file (each stage updates its own part) and ``--plot`` draws
retriever/retrieval_learned.png from it::

    python -m eval.retrieval_learned --lodo --only adapter-full
    python -m eval.retrieval_learned --unseen --sample --unseen-sets ../shared/data/toolbench_stable
    python -m eval.seal_beir ../shared/data/extras/seal_tools .cache/retriever/seal_beir
    python -m eval.retrieval_learned --unseen --unseen-sets .cache/retriever/seal_beir
    python -m eval.retrieval_learned --plot
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from eval.data_folder import dataset, unseen_sets
from eval.retrieval import load_beir
from retriever.adapter import Adapter
from retriever.bulk import DiskCache, embed_documents, text_key
from retriever.config import RetrieverConfig
from retriever.documents import ToolDocument, corpus_fields, make_document
from retriever.embedder import Encoder, Vectors, load_encoder
from retriever.finetune.adapter import AdapterSettings, train_adapter
from retriever.finetune.data import TRAIN_SETS, EmbeddedSet, load_set
from retriever.fusion import reciprocal_rank_fusion, top_k
from retriever.index import FUSION_DEPTH
from retriever.lexical import BM25Index
from retriever.metrics import ndcg_at, recall_at

KS = (1, 5, 10)
WEIGHTS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8)

#: The adapter variants compared (names are the README's).
VARIANTS: dict[str, AdapterSettings] = {
    "adapter-full": AdapterSettings(),
    "adapter-full-nohard": AdapterSettings(hard_weight=0.0),
    "adapter-lowrank32": AdapterSettings(rank=32, learning_rate=3e-3),
}


@dataclass
class EvalSet:
    """A set's tools and queries with the base encoder's vectors and relevance."""

    name: str
    doc_ids: list[str]
    doc_texts: list[str]
    doc_vectors: Vectors
    query_texts: list[str]
    query_vectors: Vectors
    relevant: list[dict[str, int]]
    corpus_size: int = 0  # the whole corpus's, when only a sample is scored
    bm25_top: list[np.ndarray[Any, Any]] | None = None

    def lexical(self) -> list[np.ndarray[Any, Any]]:
        """BM25's top ``FUSION_DEPTH`` per query (as the index ranks it), computed once."""
        if self.bm25_top is None:
            index = BM25Index(self.doc_texts)
            tops = []
            for text in self.query_texts:
                scores = index.scores(text)
                tops.append(np.asarray([i for i in top_k(scores, FUSION_DEPTH) if scores[i] > 0]))
            self.bm25_top = tops
        return self.bm25_top


def from_training(data: EmbeddedSet) -> EvalSet:
    return EvalSet(
        name=data.name,
        doc_ids=data.doc_ids,
        doc_texts=data.doc_texts,
        doc_vectors=data.doc_vectors,
        query_texts=data.query_texts,
        query_vectors=data.query_vectors,
        relevant=[{data.doc_ids[i]: 1 for i in rows} for rows in data.positives],
    )


def from_beir(folder: Path, encoder: Encoder, cache_dir: Path, *, sample: bool) -> EvalSet:
    """A BEIR folder's set; with ``sample``, only the documents that are relevant or in the
    longest embedded prefix of a seeded random order of the rest (a uniform sample of the
    distractors, for a corpus whose embedding has not finished)."""
    data = load_beir(folder)
    documents = [make_document(corpus_fields(row)) for row in data.corpus]
    if sample:
        documents = _embedded_sample(documents, data.qrels, encoder, cache_dir)
    texts = [doc.text for doc in documents]
    queries = [query.text for query in data.queries]
    return EvalSet(
        name=folder.name,
        doc_ids=[doc.id for doc in documents],
        doc_texts=texts,
        doc_vectors=embed_documents(encoder, texts, cache_dir=cache_dir, label=f"{folder.name}"),
        query_texts=queries,
        query_vectors=embed_documents(encoder, queries, cache_dir=cache_dir, progress=False),
        relevant=[data.qrels[query.id] for query in data.queries],
        corpus_size=len(data.corpus),
    )


def _embedded_sample(
    documents: list[ToolDocument],
    qrels: dict[str, dict[str, int]],
    encoder: Encoder,
    cache_dir: Path,
) -> list[ToolDocument]:
    cached = DiskCache(cache_dir, encoder.name).vectors
    relevant = {doc for docs in qrels.values() for doc in docs}
    rest = [doc for doc in documents if doc.id not in relevant]
    random.Random(0).shuffle(rest)
    prefix = next((i for i, doc in enumerate(rest) if text_key(doc.text) not in cached), len(rest))
    kept = {doc.id for doc in rest[:prefix]} | relevant
    return [doc for doc in documents if doc.id in kept]


def score(
    data: EvalSet, matrix: Vectors | None, weights: Sequence[float]
) -> dict[str, dict[str, float]]:
    """Metrics of dense, BM25 and each fusion weight (``hybrid@w``) for one map."""
    queries, docs = data.query_vectors, data.doc_vectors
    if matrix is not None:
        adapter = Adapter(matrix, "", "")
        queries, docs = adapter.apply(queries), adapter.apply(docs)
    dense = [top_k(row, FUSION_DEPTH) for row in queries @ docs.T]
    lexical = data.lexical()
    runs: dict[str, list[list[int]]] = {"dense": [list(r) for r in dense]}
    runs["bm25"] = [list(r) for r in lexical]
    for weight in weights:
        pair = (2 * weight, 2 * (1 - weight))
        runs[f"hybrid@{weight}"] = [
            [i for i, _ in reciprocal_rank_fusion([d, b], FUSION_DEPTH, weights=pair)]
            if len(b)
            else list(d)
            for d, b in zip(dense, lexical, strict=True)
        ]
    return {method: metrics(data, rows) for method, rows in runs.items()}


def metrics(data: EvalSet, runs: list[list[int]]) -> dict[str, float]:
    totals = {f"{m}@{k}": 0.0 for m in ("ndcg", "recall") for k in KS}
    for rows, relevant in zip(runs, data.relevant, strict=True):
        ranked = [data.doc_ids[i] for i in rows]
        for k in KS:
            totals[f"ndcg@{k}"] += ndcg_at(ranked, relevant, k)
            totals[f"recall@{k}"] += recall_at(ranked, relevant, k)
    return {name: round(100 * value / len(data.relevant), 2) for name, value in totals.items()}


def lodo(sets: list[EmbeddedSet], report: dict[str, Any]) -> None:
    """Every variant trained without each set and scored on it."""
    held: dict[str, Any] = {}
    seconds: dict[str, list[float]] = {}
    for left_out in sets:
        rest = [s for s in sets if s is not left_out]
        evaluation = from_training(left_out)
        results = {"base": score(evaluation, None, WEIGHTS)}
        for name, settings in VARIANTS.items():
            started = time.perf_counter()
            matrix = train_adapter(rest, settings, progress=False).matrix
            seconds.setdefault(name, []).append(time.perf_counter() - started)
            results[name] = score(evaluation, matrix, WEIGHTS)
            print(f"{left_out.name:>18} {name:<22} ndcg@5 " + _summary(results[name]), flush=True)
        print(f"{left_out.name:>18} {'base':<22} ndcg@5 " + _summary(results["base"]), flush=True)
        held[left_out.name] = results
    report["lodo"] = held
    report["train_seconds"] = {name: float(np.mean(s)) for name, s in seconds.items()}
    report["choice"] = choose(held)


def _summary(results: dict[str, dict[str, float]]) -> str:
    return " ".join(f"{m}={r['ndcg@5']:.1f}" for m, r in results.items())


def choose(held: dict[str, Any]) -> dict[str, Any]:
    """The (variant, method) with the best mean held-out NDCG@5."""
    means: dict[str, float] = {}
    for variant in ["base", *VARIANTS]:
        for method in ["dense", *(f"hybrid@{w}" for w in WEIGHTS)]:
            values = [held[s][variant][method]["ndcg@5"] for s in held]
            means[f"{variant}/{method}"] = float(np.mean(values))
    best = max(means, key=lambda key: means[key])
    return {"best": best, "mean_ndcg@5": means}


def unseen(
    sets: list[EmbeddedSet],
    report: dict[str, Any],
    folders: list[Path],
    cache_dir: Path,
    *,
    sample: bool,
) -> None:
    """The chosen variant trained on every set, scored on the unseen benchmarks."""
    variant, method = report["choice"]["best"].split("/")
    weight = float(method.split("@")[1]) if method.startswith("hybrid@") else 0.5
    settings = VARIANTS.get(variant, AdapterSettings())
    started = time.perf_counter()
    matrix = train_adapter(sets, settings).matrix
    report["final_train_seconds"] = time.perf_counter() - started
    report["adapter_query_us"] = _apply_microseconds(matrix)
    encoder = load_encoder(RetrieverConfig(device="cpu", adapter=False))
    out: dict[str, Any] = {}
    for folder in folders:
        data = from_beir(folder, encoder, cache_dir, sample=sample)
        base = score(data, None, (0.5, weight))
        learned = score(data, matrix, (0.5, weight))
        out[data.name] = {
            "bm25": base["bm25"],
            "dense": base["dense"],
            "hybrid": base["hybrid@0.5"],
            f"hybrid@{weight}": base[f"hybrid@{weight}"],
            f"{variant}/dense": learned["dense"],
            f"{variant}/hybrid": learned["hybrid@0.5"],
            f"{variant}/hybrid@{weight}": learned[f"hybrid@{weight}"],
            "shipped": learned[method if method == "dense" else f"hybrid@{weight}"],
            "documents": len(data.doc_ids),
            "corpus": data.corpus_size,
        }
        print(data.name, json.dumps(out[data.name]), flush=True)
    report.setdefault("unseen", {}).update(out)


def _apply_microseconds(matrix: Vectors) -> float:
    """Median time to map one query vector (what the adapter adds to a request)."""
    adapter = Adapter(matrix, "", "")
    vector = np.ones((1, matrix.shape[0]), dtype=np.float32)
    times = []
    for _ in range(2000):
        started = time.perf_counter()
        adapter.apply(vector)
        times.append(time.perf_counter() - started)
    return round(1e6 * float(np.median(times)), 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", type=Path, default=dataset("train"))
    parser.add_argument(
        "--unseen-sets",
        type=Path,
        nargs="*",
        default=unseen_sets(),
    )
    parser.add_argument("--cache-dir", type=Path, default=Path(".cache/retriever/embeddings"))
    parser.add_argument(
        "--train-cache-dir", type=Path, default=Path(".cache/retriever/train_embeddings")
    )
    parser.add_argument("--json", type=Path, default=Path("eval/results/retrieval_learned.json"))
    parser.add_argument("--lodo", action="store_true", help="leave-one-dataset-out")
    parser.add_argument("--unseen", action="store_true", help="score the unseen benchmarks")
    parser.add_argument(
        "--plot", type=Path, nargs="?", const=Path("retriever/retrieval_learned.png")
    )
    parser.add_argument(
        "--sample",
        action="store_true",
        help="score unseen sets on their embedded random sample (see from_beir)",
    )
    parser.add_argument("--only", nargs="*", help="variants to run (default: all)")
    parser.add_argument(
        "--sets", default=",".join(TRAIN_SETS), help="training sets, comma-separated"
    )
    args = parser.parse_args()
    if args.only:
        for name in list(VARIANTS):
            if name not in args.only:
                del VARIANTS[name]
    report: dict[str, Any] = json.loads(args.json.read_text()) if args.json.is_file() else {}
    if args.lodo or args.unseen:
        encoder = load_encoder(RetrieverConfig(device="cpu", adapter=False))
        sets = [
            load_set(args.train / name, encoder, cache_dir=args.train_cache_dir)
            for name in args.sets.split(",")
        ]
        if args.lodo:
            lodo(sets, report)
            _write(args.json, report)
        if args.unseen:
            unseen(sets, report, args.unseen_sets, args.cache_dir, sample=args.sample)
            _write(args.json, report)
    if args.plot:
        from eval.retrieval_learned_plot import plot, tables

        plot(report, args.plot)
        print(tables(report))


def _write(path: Path, report: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
