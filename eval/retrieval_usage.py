"""Usage-derived tool vectors: a tool's vector blended with the mean of the training
queries that used it, measured where usage exists.

Held-out datasets have no usage (their tools were never called in training), so the
blend is measured inside the training sets that keep their source's split: usage from
the ``train`` queries, the blend weight chosen on ``dev`` (SGD's own; for APIBench,
which has none, a seeded quarter of its train queries), scored once on ``test``. The
queries are the ones the adapter's runs sample and cache (at most 1,000 a set, SGD's
first user turns), split by the source's label. Every
vector goes through the adapter trained without the set (the leave-one-dataset-out
fold), and the test queries are reported in two groups: those whose relevant tools
all have usage and those whose relevant tools have none (SGD's test split has services
never seen in training; APIBench's train queries are Torch Hub's only)::

    python -m eval.retrieval_usage
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from eval.retrieval_folds import SHIPPED_WEIGHT, fold_matrix, mapped
from eval.retrieval_learned import EvalSet, from_training, score
from retriever.config import RetrieverConfig
from retriever.embedder import Vectors, load_encoder
from retriever.finetune.data import TRAIN_SETS, EmbeddedSet, load_set

#: Sets whose source keeps a split (their queries as the adapter's runs sample them).
SPLIT_SETS = ("sgd", "gorilla_apibench")
BLENDS = (0.0, 0.1, 0.2, 0.3, 0.5, 0.7)
METHOD = f"hybrid@{SHIPPED_WEIGHT}"


@dataclass
class SplitSet:
    name: str
    tools: EvalSet  # doc_* filled; queries of one split at a time (see of_split)
    queries: dict[str, tuple[list[str], Vectors, list[dict[str, int]]]]


def split_set(folder: Path, data: EmbeddedSet) -> SplitSet:
    """The set's (capped, already embedded) queries grouped by their source split."""
    split_of = {str(row["_id"]): str(row.get("split")) for row in _lines(folder / "queries.jsonl")}
    rows: dict[str, list[int]] = {}
    for i, query_id in enumerate(data.query_ids):
        rows.setdefault(split_of[query_id], []).append(i)
    if "dev" not in rows:  # APIBench: a seeded quarter of train
        train = list(rows["train"])
        random.Random(0).shuffle(train)
        rows["dev"], rows["train"] = (
            sorted(train[: len(train) // 4]),
            sorted(train[len(train) // 4 :]),
        )
    tools = from_training(data)
    queries = {
        split: (
            [data.query_texts[i] for i in keep],
            data.query_vectors[keep],
            [tools.relevant[i] for i in keep],
        )
        for split, keep in rows.items()
    }
    return SplitSet(data.name, tools, queries)


def of_split(data: SplitSet, split: str, keep: Sequence[int] | None = None) -> EvalSet:
    texts, vectors, relevant = data.queries[split]
    rows = list(range(len(texts))) if keep is None else list(keep)
    return EvalSet(
        name=data.name,
        doc_ids=data.tools.doc_ids,
        doc_texts=data.tools.doc_texts,
        doc_vectors=data.tools.doc_vectors,
        query_texts=[texts[i] for i in rows],
        query_vectors=vectors[rows],
        relevant=[relevant[i] for i in rows],
    )


def usage_vectors(data: SplitSet, matrix: Vectors) -> dict[int, Vectors]:
    """Per tool row with training usage, the normalised mean of its train queries."""
    _, vectors, relevant = data.queries["train"]
    queries = mapped(vectors, matrix)
    row_of = {doc: i for i, doc in enumerate(data.tools.doc_ids)}
    sums: dict[int, list[Vectors]] = {}
    for vector, docs in zip(queries, relevant, strict=True):
        for doc in docs:
            if doc in row_of:
                sums.setdefault(row_of[doc], []).append(vector)
    means = {row: np.mean(rows, axis=0) for row, rows in sums.items()}
    return {row: mean / max(float(np.linalg.norm(mean)), 1e-12) for row, mean in means.items()}


def blended(docs: Vectors, usage: dict[int, Vectors], weight: float) -> Vectors:
    """Tool vectors with usage moved ``weight`` of the way to it (normalised)."""
    out = docs.copy()
    for row, vector in usage.items():
        mixed = (1 - weight) * docs[row] + weight * vector
        out[row] = mixed / max(float(np.linalg.norm(mixed)), 1e-12)
    return out


def evaluate_set(data: SplitSet, matrix: Vectors) -> dict[str, Any]:
    usage = usage_vectors(data, matrix)
    docs = mapped(data.tools.doc_vectors, matrix)
    used = {data.tools.doc_ids[row] for row in usage}

    def run(split: str, weight: float, keep: Sequence[int] | None = None) -> dict[str, Any]:
        evaluation = of_split(data, split, keep)
        evaluation.query_vectors = mapped(evaluation.query_vectors, matrix)
        evaluation.doc_vectors = blended(docs, usage, weight)
        return score(evaluation, None, (SHIPPED_WEIGHT,))

    dev = {weight: run("dev", weight)[METHOD]["ndcg@5"] for weight in BLENDS}
    chosen = max(BLENDS, key=lambda weight: (dev[weight], -weight))
    relevant = data.queries["test"][2]
    groups = {
        "all": None,
        "tools with usage": [i for i, r in enumerate(relevant) if set(r) <= used],
        "tools without usage": [i for i, r in enumerate(relevant) if not set(r) & used],
    }
    test = {}
    for group, keep in groups.items():
        if keep is not None and not keep:
            continue
        test[group] = {
            "queries": len(relevant) if keep is None else len(keep),
            "before": _pick(run("test", 0.0, keep)),
            "usage": _pick(run("test", chosen, keep)),
        }
    return {
        "dev_ndcg@5": dev,
        "chosen_weight": chosen,
        "tools_with_usage": len(usage),
        "tools": len(docs),
        "train_queries": len(data.queries["train"][0]),
        "test": test,
    }


def _pick(results: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    return {"dense": results["dense"], METHOD: results[METHOD]}


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", type=Path, default=Path("../shared/data/train"))
    parser.add_argument(
        "--train-cache-dir", type=Path, default=Path(".cache/retriever/train_embeddings")
    )
    parser.add_argument("--json", type=Path, default=Path("eval/results/retrieval_usage.json"))
    args = parser.parse_args()
    encoder = load_encoder(RetrieverConfig(device="cpu", adapter=False))
    sets = [
        load_set(args.train / name, encoder, cache_dir=args.train_cache_dir, progress=False)
        for name in TRAIN_SETS
    ]
    report = {}
    by_name = {data.name: data for data in sets}
    for name in SPLIT_SETS:
        data = split_set(args.train / name, by_name[name])
        report[name] = evaluate_set(data, fold_matrix(sets, name, args.train_cache_dir))
        print(name, json.dumps(report[name]), flush=True)
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
