"""Multi-intent requests: split the query into clauses, retrieve per clause, fuse.

A request that asks for several things ("find a flight … and also show me the
seats") has one relevant tool per clause, while the whole query's vector sits between
them. Each rule here splits the query (``SPLITTERS``), ranks every clause with the
shipped hybrid (adapter, BM25 at dense weight 0.8) and fuses the clause rankings with
the whole query's (``RULES``); a query that splits into fewer than two clauses keeps
the whole query's ranking.

The rule is chosen leave-one-dataset-out over the eight training sets (each set's
scores with the adapter trained on the other seven; for each held-out set the rule
with the best mean NDCG@5 on the other seven is the one scored on it; the rule best
on all eight is the choice), then scored once on the unseen sets, which choose nothing::

    python -m eval.retrieval_clauses --lodo
    python -m eval.retrieval_clauses --unseen --sample
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from eval.retrieval_folds import SHIPPED_WEIGHT, bm25_top, dense_top, fold_matrix, hybrid, mapped
from eval.retrieval_learned import EvalSet, from_beir, from_training, metrics, score
from retriever.adapter import LINEAR_ADAPTER, Adapter, load_adapter
from retriever.bulk import embed_documents
from retriever.clauses import cut
from retriever.config import RetrieverConfig
from retriever.embedder import Encoder, Vectors, load_encoder
from retriever.finetune.data import TRAIN_SETS, load_set
from retriever.fusion import reciprocal_rank_fusion, top_k
from retriever.index import FUSION_DEPTH
from retriever.lexical import BM25Index

_EVERY_AND = re.compile(r",?\s+and\s+|,\s+then\s+", re.I)

#: How a query is cut: at sentence ends; also at connectives that join requests
#: (", and", "and also", "and then", "as well as"); also at every "and".
SPLITTERS: dict[str, Callable[[str], list[str]]] = {
    "sentences": lambda text: cut(text, None),
    "connectives": cut,
    "every-and": lambda text: cut(text, _EVERY_AND),
}

#: How the clause rankings meet the whole query's: RRF with the whole query's ranking
#: weighted ``w`` and the clauses sharing the rest; round-robin from the whole query's
#: first hit; the dense score as the best cosine over the whole query and its clauses,
#: fused with the whole query's BM25 as the index fuses.
RULES = ("rrf@0.5", "rrf@0.7", "round-robin", "max-dense")

BASELINE = "whole"


@dataclass
class ClauseRuns:
    """One set's whole-query and per-clause rankings under one map."""

    whole: list[np.ndarray[Any, Any]]
    whole_dense_scores: Vectors
    clauses: list[list[np.ndarray[Any, Any]]]  # per query, per clause: hybrid ranking
    clause_vectors: list[Vectors]  # per query, its clauses' mapped vectors


def clause_runs(
    data: EvalSet,
    matrix: Vectors | None,
    splitter: Callable[[str], list[str]],
    encoder: Encoder,
    cache_dir: Path,
) -> ClauseRuns:
    docs = mapped(data.doc_vectors, matrix)
    queries = mapped(data.query_vectors, matrix)
    scores = queries @ docs.T
    lexical = data.lexical()
    whole = [hybrid(top_k(row, FUSION_DEPTH), b) for row, b in zip(scores, lexical, strict=True)]
    split = [splitter(text) for text in data.query_texts]
    split = [parts if len(parts) >= 2 else [] for parts in split]
    texts = sorted({part for parts in split for part in parts})
    vectors = embed_documents(encoder, texts, cache_dir=cache_dir, progress=False)
    row_of = {text: i for i, text in enumerate(texts)}
    clause_vectors = mapped(vectors, matrix) if texts else vectors
    index = BM25Index(data.doc_texts) if texts else None
    clauses: list[list[np.ndarray[Any, Any]]] = []
    per_query_vectors: list[Vectors] = []
    for parts in split:
        if not parts or index is None:
            clauses.append([])
            per_query_vectors.append(np.zeros((0, docs.shape[1]), dtype=np.float32))
            continue
        own = clause_vectors[[row_of[p] for p in parts]]
        dense = dense_top(own, docs)
        clauses.append([hybrid(d, b) for d, b in zip(dense, bm25_top(index, parts), strict=True)])
        per_query_vectors.append(own)
    return ClauseRuns(whole, scores, clauses, per_query_vectors)


def fuse(runs: ClauseRuns, rule: str, data: EvalSet, docs: Vectors) -> list[list[int]]:
    out = []
    for row, (whole, clauses) in enumerate(zip(runs.whole, runs.clauses, strict=True)):
        if not clauses or rule == BASELINE:
            out.append(list(whole))
        elif rule.startswith("rrf@"):
            share = float(rule.split("@")[1])
            weights = [share] + [(1 - share) / len(clauses)] * len(clauses)
            fused = reciprocal_rank_fusion([whole, *clauses], FUSION_DEPTH, weights=weights)
            out.append([i for i, _ in fused])
        elif rule == "round-robin":
            out.append(_round_robin([whole, *clauses]))
        else:  # max-dense
            best = np.max(runs.clause_vectors[row] @ docs.T, axis=0)
            dense = top_k(np.maximum(runs.whole_dense_scores[row], best), FUSION_DEPTH)
            out.append(list(hybrid(dense, data.lexical()[row])))
    return out


def _round_robin(rankings: Sequence[np.ndarray[Any, Any]]) -> list[int]:
    seen: dict[int, None] = {}
    for rank in range(FUSION_DEPTH):
        for ranking in rankings:
            if rank < len(ranking):
                seen.setdefault(int(ranking[rank]), None)
    return list(seen)[:FUSION_DEPTH]


def score_rules(
    data: EvalSet, matrix: Vectors | None, encoder: Encoder, cache_dir: Path
) -> dict[str, dict[str, float]]:
    """Every splitter x rule's metrics on one set, with the whole query's as ``whole``."""
    docs = mapped(data.doc_vectors, matrix)
    results: dict[str, dict[str, float]] = {}
    for name, splitter in SPLITTERS.items():
        runs = clause_runs(data, matrix, splitter, encoder, cache_dir)
        if BASELINE not in results:
            results[BASELINE] = metrics(data, fuse(runs, BASELINE, data, docs))
        split = sum(1 for c in runs.clauses if c)
        share = 100 * split / max(1, len(runs.clauses))
        results[f"{name}/split"] = {"queries": float(split), "share": share}
        for rule in RULES:
            results[f"{name}/{rule}"] = metrics(data, fuse(runs, rule, data, docs))
    return results


def candidates(results: dict[str, dict[str, float]]) -> list[str]:
    return [key for key in results if not key.endswith("/split")]


def lodo(sets_results: dict[str, dict[str, dict[str, float]]]) -> dict[str, Any]:
    """Per held-out set, the rule best on the other seven and its score there; the
    rule best on all eight is the choice."""
    names = list(sets_results)
    rules = candidates(sets_results[names[0]])

    def mean(keys: Sequence[str], rule: str) -> float:
        return float(np.mean([sets_results[k][rule]["ndcg@5"] for k in keys]))

    folds = {}
    for held in names:
        others = [n for n in names if n != held]
        chosen = max(rules, key=lambda rule: mean(others, rule))
        folds[held] = {
            "chosen": chosen,
            "ndcg@5": sets_results[held][chosen]["ndcg@5"],
            "whole ndcg@5": sets_results[held][BASELINE]["ndcg@5"],
        }
    means = {rule: mean(names, rule) for rule in rules}
    return {"folds": folds, "mean_ndcg@5": means, "best": max(rules, key=lambda r: means[r])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", type=Path, default=Path("../shared/data/train"))
    parser.add_argument(
        "--unseen-sets",
        type=Path,
        nargs="*",
        default=[Path("../shared/data/toolbench_stable"), Path(".cache/retriever/seal_beir")],
    )
    parser.add_argument("--cache-dir", type=Path, default=Path(".cache/retriever/embeddings"))
    parser.add_argument(
        "--train-cache-dir", type=Path, default=Path(".cache/retriever/train_embeddings")
    )
    parser.add_argument("--json", type=Path, default=Path("eval/results/retrieval_clauses.json"))
    parser.add_argument("--lodo", action="store_true")
    parser.add_argument("--unseen", action="store_true")
    parser.add_argument("--sample", action="store_true", help="see eval.retrieval_learned")
    parser.add_argument("--sets", default=",".join(TRAIN_SETS), help="the adapters' sets")
    parser.add_argument("--held-out", help="the sets scored, in this order (default: --sets)")
    parser.add_argument(
        "--plot", type=Path, nargs="?", const=Path("retriever/retrieval_clauses.png")
    )
    args = parser.parse_args()
    report: dict[str, Any] = json.loads(args.json.read_text()) if args.json.is_file() else {}
    if args.lodo or args.unseen:
        encoder = load_encoder(RetrieverConfig(device="cpu", adapter=False))
    if args.lodo:
        sets = [
            load_set(args.train / name, encoder, cache_dir=args.train_cache_dir)
            for name in args.sets.split(",")
        ]
        per_set: dict[str, dict[str, dict[str, float]]] = {}
        by_name = {data.name: data for data in sets}
        for name in (args.held_out or args.sets).split(","):
            data = by_name[name]
            matrix = fold_matrix(sets, data.name, args.train_cache_dir)
            per_set[data.name] = score_rules(
                from_training(data), matrix, encoder, args.train_cache_dir
            )
            print(data.name, _line(per_set[data.name]), flush=True)
            # Written after every set: a run stopped early keeps the folds it finished.
            report["lodo"] = per_set
            report["choice"] = lodo(per_set)
            _write(args.json, report)
        print("choice:", report["choice"]["best"], json.dumps(report["choice"]["folds"]))
    if args.unseen:
        best = report["choice"]["best"]
        adapter = load_adapter(LINEAR_ADAPTER)
        assert isinstance(adapter, Adapter)
        for folder in args.unseen_sets:
            target = from_beir(folder, encoder, args.cache_dir, sample=args.sample)
            results = score_rules(target, adapter.matrix, encoder, args.cache_dir)
            kept = {k: v for k, v in results.items() if k in (BASELINE, best) or "/split" in k}
            kept["documents"] = {"count": float(len(target.doc_ids)), "corpus": target.corpus_size}
            kept.update(_reference(target, adapter.matrix))
            report.setdefault("unseen", {})[target.name] = kept
            print(target.name, _line(kept), flush=True)
            _write(args.json, report)
    if args.plot:
        plot(report, args.plot)


def plot(report: dict[str, Any], out: Path) -> None:
    """NDCG@5 per held-out set: the whole query against the rule its fold chose."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folds = report["choice"]["folds"]
    names = list(folds)
    figure, axes = plt.subplots(figsize=(10, 4))
    xs = np.arange(len(names))
    whole = [folds[n]["whole ndcg@5"] for n in names]
    axes.bar(xs - 0.2, whole, 0.4, label="whole query (shipped)")
    axes.bar(xs + 0.2, [folds[n]["ndcg@5"] for n in names], 0.4, label="rule chosen on the others")
    axes.set_xticks(xs, [f"{n}\n{folds[n]['chosen']}" for n in names], fontsize=7)
    axes.set_ylabel("NDCG@5 (%), held out")
    axes.set_title(
        f"Clause-split retrieval, leave-one-dataset-out (choice: {report['choice']['best']})"
    )
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(out, dpi=110)
    plt.close(figure)


def _reference(data: EvalSet, matrix: Vectors) -> dict[str, dict[str, float]]:
    """BM25, the previous default (bare encoder, equal RRF) and the adapter's dense
    ranking on the same documents, next to the shipped hybrid (``whole``)."""
    base = score(data, None, (0.5, SHIPPED_WEIGHT))
    learned = score(data, matrix, (SHIPPED_WEIGHT,))
    return {
        "bm25": base["bm25"],
        "dense": base["dense"],
        "hybrid (RRF 0.5, before)": base["hybrid@0.5"],
        f"hybrid@{SHIPPED_WEIGHT}": base[f"hybrid@{SHIPPED_WEIGHT}"],
        "adapter dense": learned["dense"],
        f"adapter hybrid@{SHIPPED_WEIGHT} (shipped)": learned[f"hybrid@{SHIPPED_WEIGHT}"],
    }


def _line(results: dict[str, dict[str, float]]) -> str:
    return " ".join(f"{k}={v['ndcg@5']:.1f}" for k, v in results.items() if "ndcg@5" in v)


def _write(path: Path, report: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
