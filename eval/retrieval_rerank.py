"""Retrieval by stage on sets the reranker never trained on: BM25, the first stage (the
shipped hybrid search), the first stage with documents expanded by their questions, and
each with the late-interaction reranker over its top 30.

Left out: the training sets the shipped reranker did not see (``HELD_OUT`` of
:mod:`retriever.finetune.late`), every query. Unseen: toolbench_stable and Seal-Tools,
every relevant tool plus a seeded sample of the others (``--distractors``), the first
``--queries`` queries. The reranker's first-stage weight is chosen on training-set
queries the reranker never read (``--choose``: SGD's and CallNavi's left-over queries),
never on a reported set. The first stage here is the shipped one, whose adapter trained
on every training set: its left-out rows are left out for the reranker only
(:mod:`eval.retrieval_table` scores each with an adapter that never saw it)::

    python -m eval.retrieval_rerank --json eval/results/retrieval_rerank.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from eval.data_folder import dataset, unseen_sets
from eval.retrieval import _encode_queries, load_beir
from retriever.bulk import embed_documents
from retriever.config import RetrieverConfig
from retriever.documents import ToolDocument, ToolFields, corpus_fields, make_document
from retriever.embedder import Encoder, bundled_model_path, load_encoder
from retriever.expansion import questions
from retriever.finetune.data import _json_lines, _qrels, read_set
from retriever.finetune.late import HELD_OUT
from retriever.index import RERANK_DEPTH, ExtraRows, Hit, ToolIndex
from retriever.metrics import ndcg_at, recall_at
from retriever.rerank.reranker import Reranker, maxsim
from retriever.rerank.weights import load_weights

WEIGHTS = (0.0, 0.1, 0.2, 0.3, 0.5, 1.0)


@dataclass
class Set:
    name: str
    fields: list[ToolFields]
    query_texts: list[str]
    relevant: list[dict[str, int]]


def training_set(folder: Path, *, unused_by: int | None = None, limit: int | None = None) -> Set:
    """A training folder's tools and queries; ``unused_by``: only the queries that
    :func:`read_set` with that many queries did not keep (never trained on)."""
    rows = list(_json_lines(folder / "corpus.jsonl"))
    qrels = _qrels(folder / "qrels" / "train.tsv")
    kept: set[str] = set()
    if unused_by is not None:
        kept = set(read_set(folder, max_queries=unused_by, max_tools=10**9).query_ids)
    queries = [
        (str(r["_id"]), str(r["text"]))
        for r in _json_lines(folder / "queries.jsonl")
        if str(r["_id"]) in qrels
        and str(r["_id"]) not in kept
        and (folder.name != "sgd" or r.get("first_user_turn") is True)
    ]
    if limit and len(queries) > limit:
        queries = sorted(random.Random(0).sample(queries, limit))
    return Set(
        folder.name,
        [corpus_fields(r) for r in rows],
        [t for _, t in queries],
        [dict.fromkeys(qrels[q], 1) for q, _ in queries],
    )


def unseen_set(folder: Path, distractors: int, limit: int) -> Set:
    data = load_beir(folder)
    queries = data.queries
    if len(queries) > limit:
        picked = set(random.Random(0).sample(range(len(queries)), limit))
        queries = [q for i, q in enumerate(queries) if i in picked]
    relevant = {d for q in queries for d in data.qrels[q.id]}
    rows = [r for r in data.corpus if str(r["_id"]) in relevant]
    rest = [r for r in data.corpus if str(r["_id"]) not in relevant]
    random.Random(0).shuffle(rest)
    rows += rest[:distractors]
    return Set(
        folder.name,
        [corpus_fields(r) for r in rows],
        [q.text for q in queries],
        [data.qrels[q.id] for q in queries],
    )


def build(data: Set, encoder: Encoder, cache: Path, expand: bool) -> tuple[ToolIndex, float]:
    """The set's index as the proxy builds it; with ``expand``, each tool's questions as
    extra rows. Also the seconds spent writing and embedding the questions."""
    documents = [make_document(f) for f in data.fields]
    vectors = embed_documents(
        encoder, [d.text for d in documents], cache_dir=cache, label=f"{data.name} tools"
    )
    extra = None
    seconds = 0.0
    if expand:
        started = time.perf_counter()
        written = [questions(f) for f in data.fields]
        texts = [q for qs in written for q in qs]
        owners = np.repeat(np.arange(len(written)), [len(qs) for qs in written])
        extra_vectors = embed_documents(
            encoder, texts, cache_dir=cache, label=f"{data.name} questions"
        )
        extra = ExtraRows(extra_vectors, owners.astype(np.intp))
        seconds = time.perf_counter() - started
    return ToolIndex.from_config(
        _dedupe(documents), vectors, RetrieverConfig(), extra=extra
    ), seconds


def _dedupe(documents: list[ToolDocument]) -> list[ToolDocument]:
    return documents


def metrics(runs: Sequence[Sequence[str]], relevant: Sequence[dict[str, int]]) -> dict[str, float]:
    return {
        "ndcg@5": round(
            100 * float(np.mean([ndcg_at(r, g, 5) for r, g in zip(runs, relevant, strict=False)])),
            2,
        ),
        "recall@5": round(
            100
            * float(np.mean([recall_at(r, g, 5) for r, g in zip(runs, relevant, strict=False)])),
            2,
        ),
    }


def stage_runs(data: Set, index: ToolIndex, encoder: Encoder, reranker: Reranker) -> dict[str, Any]:
    """Each query's first-stage top 30 and the reranker's MaxSim of each."""
    rows = _encode_queries(encoder, data.query_texts, clauses=True)
    firsts: list[list[Hit]] = []
    sims: list[np.ndarray] = []
    for vector, text in zip(rows, data.query_texts, strict=True):
        hits = index.search(vector, text, RERANK_DEPTH, method="hybrid", rerank=False)
        firsts.append(hits)
        tools = reranker.tool_tokens([index.documents[index._row_of_id[h.id]].text for h in hits])
        sims.append(maxsim(reranker.query_tokens(text), [t.astype(np.float32) for t in tools]))
    return {"first": firsts, "sims": sims}


def reranked(runs: dict[str, Any], weight: float) -> list[list[str]]:
    out = []
    for hits, sims in zip(runs["first"], runs["sims"], strict=True):
        combined = sims + weight * np.asarray([h.score for h in hits], dtype=np.float32)
        out.append([hits[i].id for i in np.argsort(-combined, kind="stable")])
    return out


def evaluate(data: Set, encoder: Encoder, reranker: Reranker, cache: Path) -> dict[str, Any]:
    result: dict[str, Any] = {"tools": len(data.fields), "queries": len(data.query_texts)}
    plain, _ = build(data, encoder, cache, expand=False)
    result["bm25"] = metrics(
        [[h.id for h in plain.search(None, t, 10, method="bm25")] for t in data.query_texts],
        data.relevant,
    )
    expanded, seconds = build(data, encoder, cache, expand=True)
    result["expansion_seconds_per_1000_tools"] = round(1000 * seconds / len(data.fields), 1)
    for label, index in (("first", plain), ("expanded", expanded)):
        runs = stage_runs(data, index, encoder, reranker)
        result[label] = metrics([[h.id for h in hits] for hits in runs["first"]], data.relevant)
        result[f"{label}+rerank"] = {
            f"w{w}": metrics(reranked(runs, w), data.relevant) for w in WEIGHTS
        }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train-dir", type=Path, default=dataset("train"))
    parser.add_argument(
        "--unseen",
        type=Path,
        nargs="*",
        default=unseen_sets(),
    )
    parser.add_argument("--weights", type=Path, default=None, help="the reranker's file")
    parser.add_argument("--distractors", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--cache-dir", type=Path, default=Path(".cache/retriever/embeddings"))
    parser.add_argument("--only", default="", help="sets to run, comma-separated")
    parser.add_argument("--json", type=Path, default=Path("eval/results/retrieval_rerank.json"))
    args = parser.parse_args()
    encoder = load_encoder(RetrieverConfig())
    reranker = Reranker(
        bundled_model_path(),
        load_weights(args.weights),
        Path(".cache/retriever/onnx"),
        first_stage_weight=0.0,
    )
    sets: dict[str, Callable[[], Set]] = {
        "choose:sgd": partial(training_set, args.train_dir / "sgd", unused_by=500, limit=300),
        "choose:callnavi": partial(training_set, args.train_dir / "callnavi", unused_by=500),
        **{f"held:{n}": partial(training_set, args.train_dir / n) for n in HELD_OUT},
        **{
            f"unseen:{f.name}": partial(unseen_set, f, args.distractors, args.queries)
            for f in args.unseen
        },
    }
    only = {s for s in args.only.split(",") if s}
    report: dict[str, Any] = json.loads(args.json.read_text()) if args.json.is_file() else {}
    for name, make in sets.items():
        if only and name not in only:
            continue
        started = time.perf_counter()
        report[name] = evaluate(make(), encoder, reranker, args.cache_dir)
        report[name]["load_average"] = os.getloadavg()[0]
        report[name]["seconds"] = round(time.perf_counter() - started)
        print(name, json.dumps(report[name]), flush=True)
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
