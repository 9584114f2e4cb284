"""The planning ablation of proxy/plan/README.md: retrieval, the graph, the learned weights.

Reads the ``toolgraph eval plan --json`` files of one run (one per data set), prints
the table (candidate recall, node and link F1 at each K, per policy) and draws the plot:

python -m eval.plan_ablation eval/results/plan_ablation_*.json \\
    --png proxy/plan/plan_ablation.png
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

#: The ablation's steps, in order, with what each adds.
STEPS = {
    "retrieval": "retrieval alone",
    "graph": "graph, hand-set bonuses (strict)",
    "graph-rerank": "+ learned edge trust (rerank)",
    "graph-keep": "+ retrieval's head kept (all K if dense)",
    "default": "+ learned clause order (shipped)",
}
Results = Mapping[str, Mapping[str, Mapping[str, float]]]


def table(results: Results, ks: Sequence[int]) -> str:
    cells = [f"recall@{k}" for k in ks] + [f"node F1@{k}" for k in ks]
    cells += [f"link F1@{k}" for k in ks]
    lines = ["| data set | policy | " + " | ".join(cells) + " |"]
    lines.append("| --- | --- |" + " ---: |" * len(cells))
    for name, by_policy in results.items():
        for policy, label in STEPS.items():
            scores = by_policy.get(policy)
            if scores is None:
                continue
            keys = [f"candidate_recall@{k}" for k in ks] + [f"node_f1@{k}" for k in ks]
            keys += [f"link_f1@{k}" for k in ks]
            figures = " | ".join(f"{scores[key]:.1f}" for key in keys)
            lines.append(f"| {name} | {label} | {figures} |")
    return "\n".join(lines)


def plot(results: Results, ks: Sequence[int], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = [(f"candidate_recall@{k}", f"recall@{k}") for k in ks]
    metrics += [(f"link_f1@{k}", f"link F1@{k}") for k in ks]
    fig, axes = plt.subplots(1, len(results), figsize=(4.2 * len(results), 4.4), squeeze=False)
    width = 0.8 / len(STEPS)
    for column, (name, by_policy) in enumerate(results.items()):
        axis = axes[0][column]
        for i, (policy, label) in enumerate(STEPS.items()):
            scores = by_policy.get(policy, {})
            heights = [scores.get(key, 0.0) for key, _ in metrics]
            axis.bar([m + (i - len(STEPS) / 2 + 0.5) * width for m in range(len(metrics))],
                     heights, width, label=label)  # fmt: skip
        axis.set_xticks(range(len(metrics)), [short for _, short in metrics], fontsize=8)
        axis.set_title(name, fontsize=10)
        axis.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel("%")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(STEPS), fontsize=8)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.savefig(path, dpi=110)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", type=Path, nargs="+")
    parser.add_argument("--png", type=Path)
    parser.add_argument("--k", default="3,5", help="the K of the table and plot")
    args = parser.parse_args(argv)
    ks = [int(k) for k in args.k.split(",")]
    results = {
        path.stem.removeprefix("plan_ablation_"): json.loads(path.read_text())
        for path in sorted(args.files)
    }
    if args.png is not None:
        plot(results, ks, args.png)
    print(table(results, ks))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
