"""The figures of proxy/plan/README.md from ``toolgraph eval plan --json`` files.

python -m eval.plan_report eval/results/plan_*.json --png proxy/plan/plan_eval.png
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

POLICIES = ("retrieval", "graph", "graph-blend", "graph-beam", "graph-rerank")


def ks_of(scores: dict[str, float]) -> list[int]:
    found = {
        int(m.group(1)) for key in scores if (m := re.fullmatch(r"candidate_recall@(\d+)", key))
    }
    return sorted(found)


def table(results: dict[str, dict[str, dict[str, float]]], k: int) -> str:
    header = (
        f"| data set | policy | recall@{k} all | dependents | dependents, gold before | "
        "node F1 | link F1 |"
    )
    lines = [header, "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for name, by_policy in results.items():
        for policy in POLICIES:
            s = by_policy.get(policy)
            if s is None:
                continue
            gold = s.get(f"candidate_recall@{k}/dependent_gold_before")
            lines.append(
                f"| {name} | {policy} | {s[f'candidate_recall@{k}']:.1f} | "
                f"{s[f'candidate_recall@{k}/dependent']:.1f} | "
                f"{'' if gold is None else f'{gold:.1f}'} | "
                f"{s[f'node_f1@{k}']:.1f} | {s.get(f'link_f1@{k}', 0.0):.1f} |"
            )
    return "\n".join(lines)


def plot(results: dict[str, dict[str, dict[str, float]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, len(results), figsize=(4 * len(results), 6.5), squeeze=False)
    for column, (name, by_policy) in enumerate(results.items()):
        for policy in POLICIES:
            scores = by_policy.get(policy)
            if scores is None:
                continue
            ks = ks_of(scores)
            recall = [scores[f"candidate_recall@{k}/dependent"] for k in ks]
            link = [scores.get(f"link_f1@{k}", 0.0) for k in ks]
            axes[0][column].plot(ks, recall, marker="o", label=policy)
            axes[1][column].plot(ks, link, marker="o", label=policy)
        axes[0][column].set_title(name)
        axes[0][column].set_ylabel("candidate recall, dependents (%)")
        axes[1][column].set_ylabel("link F1 (%)")
        axes[1][column].set_xlabel("K (candidates per sub-task)")
        for row in axes:
            row[column].set_xscale("log")
            row[column].grid(alpha=0.3)
    axes[0][0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("files", type=Path, nargs="+")
    parser.add_argument("--png", type=Path, required=True)
    parser.add_argument("--k", type=int, default=5)
    args = parser.parse_args()
    results = {
        path.stem.removeprefix("plan_"): json.loads(path.read_text()) for path in sorted(args.files)
    }
    plot(results, args.png)
    print(table(results, args.k))


if __name__ == "__main__":
    main()
