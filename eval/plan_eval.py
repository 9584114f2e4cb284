"""``toolgraph eval plan``: the planner's selection on a TaskBench-format folder.

The folder holds ``tool_desc.json``, ``graph_desc.json`` and the labelled requests:
``data.json`` or ``data.json.gz`` (JSON lines with ``user_request``, ``task_steps``,
``task_nodes``, ``task_links``, ``type``), or, with ``--labels FILE``, TaskBench's
``labels_sample`` lines (``nodes``, ``links`` and no steps) beside ``user_requests.json``.

With ``--steps gold`` the sub-tasks are the data set's own: one per gold node, its
text the steps that name the node's tool with the tool's name masked out ("Step 1
Call flight_search to find…" → "find…"), its ``needs`` the gold links into it. Where
a data set has no steps, every sub-task's text is the user request. Selection is then
measured apart from decomposition, with no LLM:

* candidate recall@K: the share of gold nodes whose tool is in their sub-task's
  candidate list, overall, for roots and for dependents;
* node F1 and link F1 (TaskBench's: F1 of the predicted against the gold set of tool
  names, and of (source, target) name pairs, per request, averaged), by request type.

Policies: ``retrieval`` (every sub-task searched on its own), ``default`` (the
selection the proxy ships: the settings' ``planner.graph_mode`` and ``planner.beam``;
with ``retrieval``, what runs when ``--policy`` is not given), ``graph`` (strict:
dependents from the graph neighbours of the tools chosen before them), ``graph-blend``
(neighbours and retrieval ranked on one score), ``graph-beam`` (blend, runners-up
lend their neighbours), ``graph-rerank`` (retrieval's order moved by edge evidence,
proxy/plan/trust.py; the graph may fill the whole list), ``graph-keep`` (the same, but
retrieval's first half of every list kept: ``KEEP_RETRIEVED``). ``default`` adds the
order of the tools' clauses where sub-tasks share a text (proxy/plan/order.py), the
ablation's last step. Every policy's finder is built as the proxy's planner builds
its own (:func:`plan_finder`): with ``retriever.clauses`` (the default) each search also
reads the searched text's clauses. Document vectors are cached on disk.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from tqdm import tqdm

from eval.plan_catalog import build_index, plan_finder
from eval.plan_data import Dataset, Request, Tally, load_dataset, score_plan
from eval.retrieval import parse_ks
from graph_store.errors import InvalidItem
from retriever.config import RetrieverConfig

if TYPE_CHECKING:
    from proxy.config import PlannerSettings, Settings
    from proxy.plan.candidates import CandidateFinder, GraphMode
    from retriever.embedder import Encoder, Vectors

POLICIES = (
    "retrieval",
    "default",
    "graph",
    "graph-blend",
    "graph-beam",
    "graph-rerank",
    "graph-keep",
)
#: What ``--policy`` scores when not given: the baseline and the shipped selection.
DEFAULT_POLICIES = ("retrieval", "default")
LLM_POLICIES = ("llm", "vanilla", "react")
#: Runners-up per needed sub-task whose neighbours count too, in ``graph-beam``.
BEAM = 2
_MODES: dict[str, GraphMode] = {
    "graph-blend": "blend",
    "graph-beam": "blend",
    "graph-rerank": "rerank",
    "graph-keep": "rerank",
}


def score_gold_predecessors(
    finder: CandidateFinder, request: Request, vectors: dict[str, Vectors], tally: Tally, k: int
) -> None:
    """Candidate recall of dependents when the tools before them are the gold ones: what
    the graph offers apart from the errors of earlier picks."""
    gold = dict(zip((t.id for t in request.subtasks), request.nodes, strict=True))
    for task, tool in zip(request.subtasks, request.nodes, strict=True):
        if not task.needs:
            continue
        after = [found.id for n in task.needs if (found := finder.store.get_tool(gold[n]))]
        offered = finder.find(task.text, vectors[task.id], k, after=after, category=task.category)
        tally.add(
            f"candidate_recall@{k}/dependent_gold_before", float(tool in {c.tool for c in offered})
        )


def evaluate(
    data: Dataset,
    encoder: Encoder,
    ks: Sequence[int],
    policies: Sequence[str],
    *,
    cache_dir: Path | None,
    planner: PlannerSettings | None = None,
    retriever: RetrieverConfig | None = None,
    progress: bool = True,
) -> dict[str, dict[str, float]]:
    """Scores per policy; the graph's edge bonuses come from ``planner``, the search's
    clause reading from ``retriever`` (the shipped defaults when None)."""
    from proxy.plan.candidates import KEEP_RETRIEVED, weights_from
    from proxy.plan.policy import plan_without_llm
    from retriever.bulk import embed_documents

    index = build_index(data, encoder, cache_dir=cache_dir, progress=progress, config=retriever)
    texts = sorted({t.text for r in data.requests for t in r.subtasks})
    matrix = embed_documents(
        encoder, texts, cache_dir=cache_dir, progress=progress, label="embedding sub-tasks"
    )
    vector_of: dict[str, Vectors] = {text: matrix[i] for i, text in enumerate(texts)}
    results: dict[str, dict[str, float]] = {}
    for policy in policies:
        mode, beam = _selection(policy, planner)
        weights = weights_from(planner) if planner is not None else None
        keep = 0.0 if policy == "graph-rerank" else KEEP_RETRIEVED
        finder = plan_finder(
            data, index, encoder, retriever or RetrieverConfig(), weights, mode, keep
        )
        order = finder.text_order(encoder) if policy == "default" else None
        tally = Tally({})
        steps = [(k, r) for k in ks for r in data.requests]
        for k, request in tqdm(steps, desc=policy, unit="plan", disable=not progress):
            vectors = {t.id: vector_of[t.text] for t in request.subtasks}
            plan = plan_without_llm(
                finder,
                request.subtasks,
                vectors,
                k,
                use_graph=policy != "retrieval",
                beam=beam,
                order=order,
            )
            score_plan(plan, request, tally, k)
            if policy != "retrieval":
                score_gold_predecessors(finder, request, vectors, tally, k)
        scores = tally.means()
        scores.update({"llm_calls": 0.0, "llm_tokens": 0.0})
        results[policy] = scores
    return results


def _selection(policy: str, planner: PlannerSettings | None) -> tuple[GraphMode, int]:
    """The graph mode and beam a policy names; ``default`` is the proxy's own settings."""
    if policy == "default":
        return (planner.graph_mode, planner.beam) if planner else ("rerank", BEAM)
    beam = BEAM if policy in ("graph-beam", "graph-rerank", "graph-keep") else 0
    return _MODES.get(policy, "strict"), beam


def format_report(results: dict[str, dict[str, float]], ks: Sequence[int]) -> str:
    columns = [f"candidate_recall@{k}" for k in ks]
    columns += [f"candidate_recall@{k}/dependent" for k in ks]
    columns += [f"candidate_recall@{k}/dependent_gold_before" for k in ks]
    columns += [f"node_f1@{k}" for k in ks] + [f"link_f1@{k}" for k in ks]
    short = {
        c: c.replace("candidate_recall", "R")
        .replace("/dependent_gold_before", "gold")
        .replace("/dependent", "dep")
        for c in columns
    }
    lines = [f"{'policy':<12}" + "".join(f"{short[c]:>10}" for c in columns)]
    for policy, scores in results.items():
        cells = [f"{scores[c]:>10.1f}" if c in scores else f"{'-':>10}" for c in columns]
        lines.append(f"{policy:<12}" + "".join(cells))
    return "\n".join(lines)


# --- command line ---------------------------------------------------------------------


def add_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``plan`` under the ``eval`` command that eval.retrieval declares."""
    eval_parser = commands.choices["eval"]
    actions = next(a for a in eval_parser._actions if isinstance(a, argparse._SubParsersAction))
    plan = actions.add_parser("plan", help="candidate recall, node and link F1 of the planner")
    plan.add_argument("--config", type=Path, help="YAML settings file")
    plan.add_argument("--dataset", type=Path, required=True, help="a TaskBench-format folder")
    plan.add_argument("--labels", type=Path, help="labels_sample JSON lines (no data.json)")
    plan.add_argument("--steps", choices=("gold", "llm"), default="gold")
    plan.add_argument("--policy", default=",".join(DEFAULT_POLICIES),
                      help=f"comma-separated: {', '.join(POLICIES + LLM_POLICIES)}")  # fmt: skip
    plan.add_argument("--split", help="a split of split_ids.json (test)")
    plan.add_argument("--model", help="the planner model for --policy llm (upstream_model)")
    plan.add_argument("--k", default="1,3,5,10", help="candidate list sizes, comma-separated")
    plan.add_argument("--limit", type=int, help="the first N requests only")
    plan.add_argument("--json", type=Path, help="write the scores here as JSON")
    plan.add_argument("--cache-dir", type=Path, default=Path(".cache/embeddings"),
                      help="document vectors (gitignored)")  # fmt: skip
    plan.add_argument("--quiet", action="store_true", help="no progress bars")


def run_command(args: argparse.Namespace, settings: Settings, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    ks = parse_ks(args.k)
    if ks is None:
        return 2
    policies = [p.strip() for p in args.policy.split(",") if p.strip()]
    if args.steps == "llm" and policies != ["llm"]:
        print("toolgraph: --steps llm runs with --policy llm only", file=sys.stderr)
        return 2
    if not set(policies) <= {*POLICIES, *LLM_POLICIES}:
        print(f"toolgraph: --policy must name {', '.join(POLICIES)}", file=sys.stderr)
        return 2
    try:
        data = load_dataset(args.dataset, labels=args.labels, split=args.split, limit=args.limit)
    except (OSError, KeyError, ValueError, InvalidItem) as exc:
        print(f"toolgraph: cannot read {args.dataset}: {exc}", file=sys.stderr)
        return 2
    from retriever.embedder import load_encoder

    started = time.perf_counter()
    encoder = load_encoder(settings.retriever)
    results = evaluate(
        data,
        encoder,
        ks,
        [p for p in policies if p not in LLM_POLICIES],
        cache_dir=args.cache_dir,
        planner=settings.planner,
        retriever=settings.retriever,
        progress=not args.quiet,
    )
    for policy in [p for p in policies if p in LLM_POLICIES]:
        from eval.plan_llm import evaluate_llm

        index = build_index(
            data,
            encoder,
            cache_dir=args.cache_dir,
            progress=not args.quiet,
            config=settings.retriever,
        )
        results[policy] = asyncio.run(
            evaluate_llm(
                data,
                encoder,
                index,
                settings,
                ks[-1],
                args.steps,
                args.model,
                not args.quiet,
                policy,
            )
        )
    print(
        f"{data.name}: {len(data.requests)} requests ({data.skipped} skipped), "
        f"{len(data.tools)} tools, {time.perf_counter() - started:.0f} s\n"
        + format_report(results, ks),
        file=out,
    )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    return 0
