"""The retriever's README figures: markdown tables and one PNG from the result files.

python -m eval.retriever_report            # reads eval/results/retrieval_*.json
                                           # and retriever_latency.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

COLUMNS = ("ndcg@1", "ndcg@5", "ndcg@10", "recall@5", "recall@10")
LATENCY = (
    ("embed_query_batch1", "embed one query"),
    ("search_dense_exact", "exact dense search"),
    ("search_hybrid", "dense + BM25 (RRF)"),
    ("query_to_top10_dense", "query → top-10, dense"),
    ("query_to_top10_hybrid", "query → top-10, hybrid"),
    ("qdrant_local_search", "Qdrant local search"),
    ("search_dense_exact_category_filter", "exact dense, category filter"),
    ("qdrant_local_search_category_filter", "Qdrant local, category filter"),
)


def quality_table(scores: dict[str, Any]) -> str:
    lines = ["| method | " + " | ".join(COLUMNS) + " |", "|---" * (len(COLUMNS) + 1) + "|"]
    for method, row in scores.items():
        lines.append(f"| {method} | " + " | ".join(f"{row[c]:.1f}" for c in COLUMNS) + " |")
    return "\n".join(lines)


def group_table(scores: dict[str, Any], metric: str = "ndcg@5") -> str:
    groups = sorted(next(iter(scores.values()))["by_group"])
    lines = ["| method | " + " | ".join(groups) + " |", "|---" * (len(groups) + 1) + "|"]
    for method, row in scores.items():
        cells = " | ".join(f"{row['by_group'][g][metric]:.1f}" for g in groups)
        lines.append(f"| {method} | {cells} |")
    return "\n".join(lines)


def latency_table(latency: dict[str, Any]) -> str:
    lines = ["| step | p50 ms | p99 ms |", "|---|---|---|"]
    for key, label in LATENCY:
        if key in latency:
            lines.append(
                f"| {label} | {latency[key]['p50_ms']:.2f} | {latency[key]['p99_ms']:.2f} |"
            )
    return "\n".join(lines)


def plot(sets: dict[str, dict[str, Any]], latency: dict[str, Any] | None, out: Path) -> None:
    panels = len(sets) + (1 if latency else 0)
    fig, axes = plt.subplots(1, panels, figsize=(6 * panels, 4.5))
    axes = list(axes) if panels > 1 else [axes]
    for ax, (name, scores) in zip(axes, sets.items(), strict=False):
        methods = list(scores)
        width = 0.8 / len(methods)
        for i, method in enumerate(methods):
            values = [scores[method][c] for c in COLUMNS]
            ax.bar([x + i * width for x in range(len(COLUMNS))], values, width, label=method)
        ax.set_xticks([x + 0.4 - width / 2 for x in range(len(COLUMNS))], COLUMNS)
        ax.set_title(name)
        ax.set_ylabel("%")
        ax.legend(fontsize=7)
    if latency:
        ax = axes[-1]
        rows = [(label, latency[key]) for key, label in LATENCY if key in latency]
        ax.barh([r[0] for r in rows], [r[1]["p50_ms"] for r in rows], label="p50")
        ax.barh([r[0] for r in rows], [r[1]["p99_ms"] for r in rows], alpha=0.3, label="p99")
        ax.set_xscale("log")
        ax.set_xlabel("ms (log scale), 2 shared CPU cores")
        ax.set_title(f"latency, {latency['catalog']}")
        ax.invert_yaxis()
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=Path("eval/results"))
    parser.add_argument("--png", type=Path, default=Path("retriever/retrieval.png"))
    args = parser.parse_args()
    sets = {}
    for name in ("toolbench_stable", "seal_tools"):
        path = args.results / f"retrieval_{name}.json"
        if path.is_file():
            sets[name] = json.loads(path.read_text())
    latency_path = args.results / "retriever_latency.json"
    latency = json.loads(latency_path.read_text()) if latency_path.is_file() else None
    for name, scores in sets.items():
        print(f"### {name}\n\n{quality_table(scores)}\n\nNDCG@5 by query group:\n")
        print(group_table(scores) + "\n")
    if latency:
        print(latency_table(latency))
    plot(sets, latency, args.png)


if __name__ == "__main__":
    main()
