"""How often a confident pick (``planner.pick: confident``, no LLM call) takes the right
tool, by the first candidate's similarity: the figures behind ``CONFIDENT_FLOOR``.

Two samples, neither of them the e2e suite's held-aside part:

* every root step of a TaskBench-format set's gold steps (``--dataset``: UltraTool's
  test split), searched as the planner searches a sub-task that needs nothing;
* the one-tool questions of the e2e default suite and its ``dev`` part, each searched
  whole (as a one-call plan is) over the 100-tool e2e catalog (``--e2e``).

For each: whether the pick would be confident at ``planner.pick_margin`` (the first is
also the most similar by the margin), the first candidate's similarity, and whether it
is the gold tool. ``python -m eval.plan_confident --dataset $EVAL_DATA/ultratool
--split test --e2e $EVAL_DATA``.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from eval.plan_catalog import build_index, plan_finder
from eval.plan_data import Dataset, load_dataset
from graph_store.embedded import InProcessStore
from proxy.config import PlannerSettings
from retriever.config import RetrieverConfig

BUCKETS = (0.0, 0.4, 0.5, 0.55, 0.6, 0.65, 0.7, 0.8)


MARGINS = (0.0, 0.05, 0.1, 0.15, 0.2, 0.3)


@dataclass(frozen=True)
class Pick:
    similarity: float  # the first candidate's
    lead: float  # its similarity less the most similar other's
    confident: bool  # taken without asking at the margin
    right: bool  # the first candidate is the gold tool


def picks(data: Dataset, questions: Sequence[tuple[str, str]], margin: float) -> Iterator[Pick]:
    """One pick per (text, gold tool name) over ``data``'s catalog."""
    from proxy.plan.candidates import KEEP_RETRIEVED, weights_from
    from retriever.embedder import load_encoder

    config = RetrieverConfig()
    encoder = load_encoder(config)
    index = build_index(data, encoder, cache_dir=None, progress=False, config=config)
    finder = plan_finder(
        data, index, encoder, config, weights_from(PlannerSettings()), "rerank", KEEP_RETRIEVED
    )
    vectors = encoder.encode([text for text, _ in questions])
    for (text, gold), vector in zip(questions, vectors, strict=True):
        found = finder.find(text, vector, PlannerSettings().top_k)
        if len(found) < 2:
            continue
        first, others = found[0], max(c.similarity for c in found[1:])
        lead = first.similarity - others
        yield Pick(first.similarity, lead, lead >= margin, first.tool == gold)


def root_steps(data: Dataset) -> list[tuple[str, str]]:
    """(step text, gold tool) for every gold step that needs no other."""
    rows = []
    for request in data.requests:
        for task, tool in zip(request.subtasks, request.nodes, strict=False):
            if not task.needs:
                rows.append((task.text, tool))
    return rows


def e2e_data(folder: Path) -> tuple[Dataset, list[tuple[str, str]]]:
    """The 100-tool e2e catalog and its one-tool questions (default suite and dev part)."""
    from eval.e2e.bfcl import bfcl_tools
    from eval.e2e.catalog import catalog
    from eval.e2e.tasks import TASKS
    from eval.e2e.unseen import DEV

    corpus = folder / "toolbench_stable" / "corpus.jsonl.gz"
    tools = catalog(100, corpus, bfcl_tools(folder / "train" / "bfcl", "http://127.0.0.1:1/bfcl"))
    store = InProcessStore()
    store.upsert_tools(tools)
    singles = [(t.question, t.tools[0]) for t in (*TASKS, *DEV) if len(t.tools) == 1]
    return Dataset("e2e100", tools, store, []), singles


def table(name: str, rows: Sequence[Pick]) -> str:
    confident = [p for p in rows if p.confident]
    lines = [
        f"{name}: {len(rows)} picks, {len(confident)} confident, "
        f"{sum(p.right for p in confident)} of them right",
        "similarity from | confident | right | asked (not confident) | first right",
    ]
    for low, high in zip(BUCKETS, (*BUCKETS[1:], 1.01), strict=True):
        inside = [p for p in rows if low <= p.similarity < high]
        sure = [p for p in inside if p.confident]
        asked = [p for p in inside if not p.confident]
        lines.append(
            f"{low:.2f} | {len(sure)} | {sum(p.right for p in sure)} | "
            f"{len(asked)} | {sum(p.right for p in asked)}"
        )
    lines.append("lead from | picks | first right")
    for low, high in zip(MARGINS, (*MARGINS[1:], 2.0), strict=True):
        inside = [p for p in rows if low <= p.lead < high]
        lines.append(f"{low:.2f} | {len(inside)} | {sum(p.right for p in inside)}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eval.plan_confident")
    parser.add_argument("--dataset", type=Path, help="a TaskBench-format folder")
    parser.add_argument("--split", default="test")
    parser.add_argument("--e2e", type=Path, help="the EVAL_DATA folder of the e2e suite")
    parser.add_argument("--margin", type=float, default=PlannerSettings().pick_margin)
    args = parser.parse_args(argv)
    if args.dataset:
        data = load_dataset(args.dataset, split=args.split)
        print(table(data.name, list(picks(data, root_steps(data), args.margin))))
    if args.e2e:
        data, questions = e2e_data(args.e2e)
        print(table(data.name, list(picks(data, questions, args.margin))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
