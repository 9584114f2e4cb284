"""Select mode's recall of the needed tools, each training set left out: the cosine's
order against the catalog's fusion (``retriever.select_fusion``).

For each training set, the linear adapter (the shipped one's settings) is trained on the
other sets (:func:`eval.retrieval_folds.fold_matrix`) and the set's queries are asked as
select-mode requests: each brings a tool list of ``--sizes`` tools drawn from the set (the
query's relevant tools and a seeded sample of the rest, none a functional duplicate of a
relevant one). Select mode's own ranking (:class:`retriever.tool_ranking.ToolRanker`) and
choice (:func:`retriever.select.choose_tools`, ``select_top_k``, ``select_threshold`` and
``select_min_tools`` as shipped) pick what is forwarded; *recall* is the share of the
query's relevant tools among them, *recall@3* among the ranking's first three. Query
clauses are searched as the proxy searches them.

    python -m eval.select_recall [--sets callnavi,api_bank,...] [--sizes 50,300]
        [--max-queries 300] [--json eval/results/select_recall.json]

API Zoo is left out by default (its long documents take most of an hour to embed on two
shared cores), so each fold's adapter is trained on the other six sets.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
from pathlib import Path
from typing import Any

import numpy as np

from eval.data_folder import dataset
from eval.retrieval_folds import fold_matrix, mapped
from retriever.bulk import embed_documents
from retriever.clauses import split_clauses
from retriever.config import RetrieverConfig
from retriever.embedder import Encoder, Vectors, load_encoder
from retriever.finetune.data import TRAIN_SETS, EmbeddedSet, load_set
from retriever.select import SelectOptions, choose_tools
from retriever.tool_ranking import ToolRanker

DEFAULT_SETS = tuple(name for name in TRAIN_SETS if name != "gorilla_apizoo")
ARMS = {"dense": False, "fused": True}


def query_rows(
    data: EmbeddedSet, encoder: Encoder, matrix: Vectors, cache_dir: Path
) -> list[Vectors]:
    """Each query's rows as the proxy searches them: its vector, then its clauses'."""
    whole = mapped(data.query_vectors, matrix)
    clauses = [split_clauses(text) for text in data.query_texts]
    flat = [clause for found in clauses for clause in found]
    vectors = embed_documents(encoder, flat, cache_dir=cache_dir, progress=False) if flat else None
    rows, start = [], 0
    for row, found in zip(whole, clauses, strict=True):
        if not found or vectors is None:
            rows.append(row)
            continue
        rows.append(np.vstack([row, mapped(vectors[start : start + len(found)], matrix)]))
        start += len(found)
    return rows


def tool_list(data: EmbeddedSet, query: int, size: int) -> list[int]:
    """The query's relevant rows and a seeded sample of the others, shuffled."""
    relevant = data.positives[query]
    keys = {data.doc_keys[row] for row in relevant}
    others = [row for row, key in enumerate(data.doc_keys) if key not in keys]
    draw = random.Random(f"{data.name}:{query}:{size}")
    rows = relevant + draw.sample(others, min(len(others), max(0, size - len(relevant))))
    draw.shuffle(rows)
    return rows


def score_set(
    data: EmbeddedSet,
    rows: list[Vectors],
    matrix: Vectors,
    size: int,
    max_queries: int,
) -> dict[str, Any]:
    config = RetrieverConfig()
    options = SelectOptions(config.select_top_k, config.select_threshold, config.select_min_tools)
    rankers = {
        arm: ToolRanker(config.model_copy(update={"select_fusion": on})) for arm, on in ARMS.items()
    }
    docs = mapped(data.doc_vectors, matrix)
    asked = [q for q, relevant in enumerate(data.positives) if relevant][:max_queries]
    found: dict[str, list[float]] = {f"{arm}{m}": [] for arm in ARMS for m in ("", "@3")}
    for query in asked:
        listed = tool_list(data, query, size)
        texts = [data.doc_texts[row] for row in listed]
        relevant = set(data.positives[query])
        for arm, ranker in rankers.items():
            ranking = ranker.rank(rows[query], data.query_texts[query], texts, docs[listed])
            kept = choose_tools(ranking, options, [str(row) for row in listed], None)
            forwarded = {listed[i] for i in kept}
            top3 = {listed[i] for i in ranking.order[:3]}
            found[arm].append(len(relevant & forwarded) / len(relevant))
            found[f"{arm}@3"].append(len(relevant & top3) / len(relevant))
    tools = min(size, len(data.doc_ids))
    means = {name: round(100 * statistics.fmean(values), 2) for name, values in found.items()}
    return {"tools": tools, "queries": len(asked), **means}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train", type=Path, default=dataset("train"))
    parser.add_argument("--sets", default=",".join(DEFAULT_SETS))
    parser.add_argument("--sizes", default="50,300", help="tools in each request's list")
    parser.add_argument("--max-queries", type=int, default=300, help="queries scored per set")
    parser.add_argument("--cache-dir", type=Path, default=Path(".cache/retriever/embeddings"))
    parser.add_argument("--json", type=Path, default=Path("eval/results/select_recall.json"))
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    encoder = load_encoder(RetrieverConfig(adapter=False, device="cpu"))
    names = args.sets.split(",")
    sets = [load_set(args.train / name, encoder, cache_dir=args.cache_dir) for name in names]
    report: dict[str, Any] = {"load_average_at_start": round(os.getloadavg()[0], 2), "sets": {}}
    for data in sets:
        matrix = fold_matrix(sets, data.name, args.cache_dir)
        rows = query_rows(data, encoder, matrix, args.cache_dir)
        report["sets"][data.name] = {
            str(size): score_set(data, rows, matrix, size, args.max_queries) for size in sizes
        }
        print(data.name, json.dumps(report["sets"][data.name]), flush=True)
    report["load_average_at_end"] = round(os.getloadavg()[0], 2)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2) + "\n")
    print(table(report, sizes))


def table(report: dict[str, Any], sizes: list[int]) -> str:
    lines = [
        "| set | tools | queries | recall dense | recall fused | recall@3 dense | recall@3 fused |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for size in sizes:
        rows = [report["sets"][name][str(size)] for name in report["sets"]]
        for name, r in zip(report["sets"], rows, strict=True):
            lines.append(
                f"| {name} | {r['tools']} | {r['queries']} | {r['dense']:.1f} | {r['fused']:.1f} "
                f"| {r['dense@3']:.1f} | {r['fused@3']:.1f} |"
            )
        mean = {
            m: statistics.fmean(r[m] for r in rows)
            for m in ("dense", "fused", "dense@3", "fused@3")
        }
        lines.append(
            f"| **mean, lists of {size}** | | | **{mean['dense']:.2f}** | **{mean['fused']:.2f}** "
            f"| {mean['dense@3']:.2f} | {mean['fused@3']:.2f} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
