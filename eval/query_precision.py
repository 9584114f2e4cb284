"""Does an int8 query graph cost retrieval quality against fp32 documents?

The catalog is embedded once, in bulk, with the fp32 graph; a request embeds its question
alone. ``retriever.onnx_query_precision: int8`` runs those short passes on the int8 graph
(retriever/onnx_encoder.py). This scores dense NDCG@5 and Recall@5 on the training sets
(never an unseen one: this is a choice) three ways, each query embedded alone as a
request would:

* ``fp32``: fp32 documents, fp32 queries (the reference);
* ``int8 query``: fp32 documents, int8 queries (the default);
* ``int8 both``: int8 documents and queries (``onnx_precision: int8``).

    python -m eval.query_precision [--sets callnavi,api_bank,...] [--max-queries 300]

Also the median time of one query's pass on each graph, and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from eval.data_folder import dataset
from retriever.config import default_onnx_dir
from retriever.embedder import bundled_model_path
from retriever.encoder import Vectors
from retriever.finetune.data import TRAIN_SETS, TrainingSet, read_set
from retriever.metrics import ndcg_at, recall_at
from retriever.onnx_encoder import OnnxEncoder

#: API Zoo's long documents take most of an hour to embed on two shared cores.
DEFAULT_SETS = tuple(name for name in TRAIN_SETS if name != "gorilla_apizoo")


def scores(docs: Vectors, queries: Vectors, positives: list[list[int]]) -> dict[str, float]:
    ranked = [[str(row) for row in rows] for rows in np.argsort(-(queries @ docs.T), axis=1)]
    relevant = [{str(row): 1 for row in rows} for rows in positives]
    pairs = list(zip(ranked, relevant, strict=True))
    return {
        "ndcg@5": round(100 * statistics.fmean(ndcg_at(r, p, 5) for r, p in pairs), 2),
        "recall@5": round(100 * statistics.fmean(recall_at(r, p, 5) for r, p in pairs), 2),
    }


def one_at_a_time(
    encoder: OnnxEncoder, texts: list[str], label: str
) -> tuple[Vectors, list[float]]:
    vectors, times = [], []
    for text in tqdm(texts, desc=label, leave=False):
        start = time.perf_counter()
        vectors.append(encoder.encode([text])[0])
        times.append(1000 * (time.perf_counter() - start))
    return np.asarray(vectors, dtype=np.float32), times


def bulk(encoder: OnnxEncoder, texts: list[str], label: str) -> Vectors:
    batches = [
        encoder.encode(texts[i : i + 64])
        for i in tqdm(range(0, len(texts), 64), desc=label, leave=False)
    ]
    return np.concatenate(batches)


def score_set(data: TrainingSet, graphs: dict[str, OnnxEncoder]) -> dict[str, Any]:
    kept = [i for i, p in enumerate(data.positives) if p]
    texts = [data.query_texts[i] for i in kept]
    positives = [data.positives[i] for i in kept]
    fp32_docs = bulk(graphs["fp32"], data.doc_texts, f"{data.name} tools fp32")
    int8_docs = bulk(graphs["int8"], data.doc_texts, f"{data.name} tools int8")
    fp32_queries, fp32_ms = one_at_a_time(graphs["fp32"], texts, f"{data.name} queries fp32")
    int8_queries, int8_ms = one_at_a_time(graphs["query"], texts, f"{data.name} queries int8")
    return {
        "tools": len(data.doc_texts),
        "queries": len(texts),
        "fp32": scores(fp32_docs, fp32_queries, positives),
        "int8 query": scores(fp32_docs, int8_queries, positives),
        "int8 both": scores(int8_docs, int8_queries, positives),
        "query_ms_p50": {"fp32": statistics.median(fp32_ms), "int8": statistics.median(int8_ms)},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train", type=Path, default=dataset("train"))
    parser.add_argument("--sets", default=",".join(DEFAULT_SETS))
    parser.add_argument("--max-queries", type=int, default=300)
    parser.add_argument("--json", type=Path, default=Path("eval/results/query_precision.json"))
    args = parser.parse_args()
    model, folder = bundled_model_path(), default_onnx_dir()
    graphs = {
        "fp32": OnnxEncoder(model, "mean", "fp32", folder),
        "int8": OnnxEncoder(model, "mean", "int8", folder),
        "query": OnnxEncoder(model, "mean", "fp32", folder, query_precision="int8"),
    }
    report: dict[str, Any] = {"load_average_at_start": round(os.getloadavg()[0], 2), "sets": {}}
    for name in args.sets.split(","):
        data = read_set(args.train / name, max_queries=args.max_queries)
        report["sets"][name] = score_set(data, graphs)
        print(name, json.dumps(report["sets"][name]), flush=True)
    report["load_average_at_end"] = round(os.getloadavg()[0], 2)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2) + "\n")
    print(table(report))


def table(report: dict[str, Any]) -> str:
    rows = [
        "| set | tools | queries | NDCG@5 fp32 | int8 query | int8 both | query ms fp32 / int8 |"
    ]
    rows.append("|---|---|---|---|---|---|---|")
    for name, r in report["sets"].items():
        ms = r["query_ms_p50"]
        rows.append(
            f"| {name} | {r['tools']} | {r['queries']} | {r['fp32']['ndcg@5']} | "
            f"{r['int8 query']['ndcg@5']} | {r['int8 both']['ndcg@5']} | "
            f"{ms['fp32']:.1f} / {ms['int8']:.1f} |"
        )
    return "\n".join(rows)


if __name__ == "__main__":
    main()
