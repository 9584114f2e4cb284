"""retriever/retrieval_learned.png from eval/results/retrieval_learned.json: NDCG@5 per
dataset, held-out training sets (leave-one-dataset-out) and the unseen benchmarks."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def plot(report: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    variant, method = report["choice"]["best"].split("/")
    rows: list[tuple[str, dict[str, float]]] = []
    for name, results in report.get("lodo", {}).items():
        rows.append(
            (
                f"{name}\n(left out)",
                {
                    "BM25": results["base"]["bm25"]["ndcg@5"],
                    "hybrid (RRF, before)": results["base"]["hybrid@0.5"]["ndcg@5"],
                    "learned (shipped)": results[variant][method]["ndcg@5"],
                },
            )
        )
    for name, results in report.get("unseen", {}).items():
        rows.append(
            (
                f"{name}\n(unseen)",
                {
                    "BM25": results["bm25"]["ndcg@5"],
                    "hybrid (RRF, before)": results["hybrid"]["ndcg@5"],
                    "learned (shipped)": results["shipped"]["ndcg@5"],
                },
            )
        )
    labels = ["BM25", "hybrid (RRF, before)", "learned (shipped)"]
    figure, axes = plt.subplots(figsize=(12, 4.5))
    width = 0.27
    for offset, label in enumerate(labels):
        xs = [i + (offset - 1) * width for i in range(len(rows))]
        axes.bar(xs, [values[label] for _, values in rows], width, label=label)
    axes.set_xticks(range(len(rows)), [name for name, _ in rows], fontsize=7)
    axes.set_ylabel("NDCG@5 (%)")
    axes.set_title(f"Tool retrieval, data never trained on: {variant} / {method}")
    axes.legend(fontsize=8)
    figure.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=110)
    plt.close(figure)


COLUMNS = ("ndcg@1", "ndcg@5", "ndcg@10", "recall@5", "recall@10")


def tables(report: dict[str, Any]) -> str:
    """The README's tables: one row per method, a table per dataset."""
    variant, method = report["choice"]["best"].split("/")
    out = []
    for name, results in report.get("lodo", {}).items():
        rows = {
            "bm25": results["base"]["bm25"],
            "hybrid (RRF 0.5, before)": results["base"]["hybrid@0.5"],
            "dense": results["base"]["dense"],
            f"hybrid, learned weight ({method})": results["base"][method],
        }
        for learned in (v for v in results if v != "base"):
            rows[f"{learned}: dense"] = results[learned]["dense"]
            rows[f"{learned}: hybrid (RRF 0.5)"] = results[learned]["hybrid@0.5"]
            rows[f"{learned}: {method} (shipped)"] = results[learned][method]
        out.append(_table(f"{name} (left out)", rows))
    for name, results in report.get("unseen", {}).items():
        labels = {"hybrid": "hybrid (RRF 0.5, before)", f"{variant}/{method}": "(shipped)"}
        rows = {
            f"{k} {labels[k]}".replace("hybrid hybrid", "hybrid") if k in labels else k: v
            for k, v in results.items()
            if isinstance(v, dict) and k != "shipped"
        }
        sampled = results["documents"] < results["corpus"]
        title = f"{name} (unseen" + (
            f"; {results['documents']:,} of {results['corpus']:,} tools, see below)"
            if sampled
            else ")"
        )
        out.append(_table(title, rows))
    return "\n\n".join(out)


def _table(title: str, rows: dict[str, dict[str, float]]) -> str:
    lines = [f"**{title}**", "", "| method | " + " | ".join(COLUMNS) + " |"]
    lines.append("|---" * (len(COLUMNS) + 1) + "|")
    for label, values in rows.items():
        lines.append(f"| {label} | " + " | ".join(f"{values[c]:.1f}" for c in COLUMNS) + " |")
    return "\n".join(lines)
