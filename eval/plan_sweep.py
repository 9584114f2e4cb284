"""The edge-bonus sweep of proxy/plan/README.md: how far to trust the graph.

Every bonus (STRONG_DEP 0.3, WEAK_DEP 0.2, SEQUENTIAL 0.1) is multiplied by each
scale; candidate recall at K = 5 and 10 and link F1 at K = 5, for the blend and
beam policies, on UltraTool's test split and two labelled TaskBench samples.

    python -m eval.plan_sweep
"""

from __future__ import annotations

from pathlib import Path

from eval.plan_data import Dataset, load_dataset
from eval.plan_eval import evaluate
from proxy.config import Planner
from retriever.config import RetrieverConfig
from retriever.embedder import load_encoder

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
SCALES = (0.0, 0.5, 1.0, 2.0)


def datasets() -> dict[str, Dataset]:
    found = {"ultratool": load_dataset(DATA / "ultratool", split="test")}
    for domain, count in (("huggingface", 34), ("multimedia", 34)):
        labels = DATA / "taskbench" / "labels_sample" / f"{domain}_labels_first{count}.jsonl"
        found[domain] = load_dataset(DATA / "taskbench" / f"data_{domain}", labels=labels)
    return found


def main() -> None:
    encoder = load_encoder(RetrieverConfig(device="cpu"))
    sets = datasets()
    print("| scale | data set | policy | recall@5 | recall@10 | link F1@5 |")
    print("| ---: | --- | --- | ---: | ---: | ---: |")
    for scale in SCALES:
        planner = Planner(
            strong_bonus=0.3 * scale, weak_bonus=0.2 * scale, sequential_bonus=0.1 * scale
        )
        for name, data in sets.items():
            results = evaluate(
                data,
                encoder,
                [5, 10],
                ["graph-blend", "graph-beam"],
                cache_dir=Path(".cache/embeddings"),
                planner=planner,
                progress=False,
            )
            for policy, s in results.items():
                print(
                    f"| {scale} | {name} | {policy} | {s['candidate_recall@5']:.1f} | "
                    f"{s['candidate_recall@10']:.1f} | {s['link_f1@5']:.1f} |"
                )


if __name__ == "__main__":
    main()
