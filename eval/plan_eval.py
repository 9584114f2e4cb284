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
proxy/plan/trust.py). Document vectors are cached on disk.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import re
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import numpy as np
from tqdm import tqdm

from eval.retrieval import parse_ks
from graph_store.errors import InvalidItem
from graph_store.ingest.taskbench import parse_links, parse_taskbench
from graph_store.memory import InProcessStore
from graph_store.models import Tool
from proxy.plan.model import Plan, SubTask, subtask_problems
from retriever.config import RetrieverConfig

if TYPE_CHECKING:
    from proxy.config import Planner, Settings
    from proxy.plan.candidates import CandidateFinder, GraphMode
    from retriever.embedder import Encoder, Vectors
    from retriever.index import ToolIndex

POLICIES = ("retrieval", "default", "graph", "graph-blend", "graph-beam", "graph-rerank")
#: What ``--policy`` scores when not given: the baseline and the shipped selection.
DEFAULT_POLICIES = ("retrieval", "default")
LLM_POLICIES = ("llm", "vanilla", "react")
#: Runners-up per needed sub-task whose neighbours count too, in ``graph-beam``.
BEAM = 2
_MODES: dict[str, GraphMode] = {
    "graph-blend": "blend",
    "graph-beam": "blend",
    "graph-rerank": "rerank",
}
_STEP_PREFIX = re.compile(r"^\s*step\s*\d+\s*[:.)-]?\s*", re.IGNORECASE)


@dataclass(frozen=True)
class Request:
    id: str
    text: str
    type: str
    nodes: list[str]  # gold tool names, catalog spelling
    links: list[tuple[str, str]]
    subtasks: list[SubTask]


@dataclass
class Dataset:
    name: str
    tools: list[Tool]
    store: InProcessStore
    requests: list[Request]
    skipped: int = 0


def load_dataset(
    folder: Path, *, labels: Path | None = None, split: str | None = None, limit: int | None = None
) -> Dataset:
    parsed = parse_taskbench(folder / "tool_desc.json")
    tools = parsed.tools
    by_original = {tool.original_name: tool for tool in tools}
    edges, _ = parse_links(folder / "graph_desc.json", by_original)
    store = InProcessStore()
    store.upsert_tools(tools)
    store.upsert_edges(edges)
    rows = list(_label_rows(folder, labels))
    wanted = _split_ids(folder, split) if split else None
    requests, skipped = [], 0
    for row in rows:
        if wanted is not None and str(row["id"]) not in wanted:
            continue
        request = _request(row, by_original)
        if request is None:
            skipped += 1
            continue
        requests.append(request)
        if limit and len(requests) >= limit:
            break
    return Dataset(folder.resolve().name, tools, store, requests, skipped)


def _label_rows(folder: Path, labels: Path | None) -> Iterator[dict[str, Any]]:
    if labels is not None:
        texts = {
            str(r["id"]): str(r["user_request"]) for r in _json_lines(folder / "user_requests.json")
        }
        for row in _json_lines(labels):
            nodes = [n["task"] if isinstance(n, dict) else n for n in row["nodes"]]
            links = [{"source": s, "target": t} for s, t in row["links"]]
            yield {
                "id": row["id"],
                "user_request": texts.get(str(row["id"]), ""),
                "task_nodes": [{"task": n} for n in nodes],
                "task_links": links,
                "type": row.get("type", "all"),
            }
        return
    for name in ("data.json", "data.json.gz"):
        if (folder / name).is_file():
            yield from _json_lines(folder / name)
            return
    raise FileNotFoundError(f"{folder} has no data.json or data.json.gz (or pass --labels)")


def _split_ids(folder: Path, split: str) -> set[str]:
    data = json.loads((folder / "split_ids.json").read_text(encoding="utf-8"))
    ids = data.get(f"{split}_ids", data.get(split))
    if isinstance(ids, dict):
        return {str(i) for values in ids.values() for i in values}
    return {str(i) for i in ids or []}


def _json_lines(path: Path) -> Iterator[dict[str, Any]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                yield json.loads(line)


def _request(row: dict[str, Any], by_original: dict[str, Tool]) -> Request | None:
    raw_nodes = [str(n["task"]) for n in row.get("task_nodes", [])]
    if not raw_nodes or any(n not in by_original for n in raw_nodes):
        return None
    names = [by_original[n].name for n in raw_nodes]
    position = {n: i for i, n in reversed(list(enumerate(raw_nodes)))}
    links = [(str(link["source"]), str(link["target"])) for link in row.get("task_links", [])]
    links = [(s, t) for s, t in links if s in position and t in position and s != t]
    request_text = str(row.get("user_request", "")).strip()
    steps = [str(s) for s in row.get("task_steps", []) or []]
    catalog_names = sorted(by_original, key=len, reverse=True)
    subtasks = []
    for i, node in enumerate(raw_nodes):
        text = _step_text(node, steps, catalog_names) or request_text
        needs = sorted({f"s{position[s] + 1}" for s, t in links if position[t] == i})
        subtasks.append(SubTask(id=f"s{i + 1}", text=text, needs=tuple(needs)))
    if subtask_problems(subtasks):
        return None
    gold_links = sorted({(by_original[s].name, by_original[t].name) for s, t in links})
    return Request(
        str(row["id"]), request_text, str(row.get("type", "all")), names, gold_links, subtasks
    )


def _step_text(node: str, steps: Sequence[str], catalog_names: Sequence[str]) -> str:
    """The steps that call ``node``, with every tool name masked out."""
    mine = [s for s in steps if re.search(rf"\b{re.escape(node)}\b", s)]
    return " ".join(mask_tool_names(s, catalog_names) for s in mine).strip()


def mask_tool_names(step: str, names: Sequence[str]) -> str:
    text = _STEP_PREFIX.sub("", step)
    for name in names:
        text = re.sub(rf"\b{re.escape(name)}\b", " ", text)
    text = re.sub(r"^\s*(call|use)\s+(to\s+)?", "", text, flags=re.IGNORECASE)
    return " ".join(text.split())


# --- metrics --------------------------------------------------------------------------


def f1(predicted: set[object], gold: set[object]) -> float:
    if not predicted and not gold:
        return 1.0
    hits = len(predicted & gold)
    if hits == 0:
        return 0.0
    precision, recall = hits / len(predicted), hits / len(gold)
    return 2 * precision * recall / (precision + recall)


@dataclass
class Tally:
    values: dict[str, list[float]]

    def add(self, key: str, value: float) -> None:
        self.values.setdefault(key, []).append(value)

    def means(self) -> dict[str, float]:
        return {k: round(100 * float(np.mean(v)), 2) for k, v in self.values.items() if v}


def score_plan(plan: Plan, request: Request, tally: Tally, k: int) -> None:
    nodes = {plan.choices[t.id] for t in request.subtasks if t.id in plan.choices}
    node_f1 = f1(set(nodes), set(request.nodes))
    link_f1 = f1(set(plan.links()), set(request.links))
    offered = {d.subtask: {c.tool for c in d.candidates} for d in plan.decisions}
    for task, gold in zip(request.subtasks, request.nodes, strict=True):
        hit = float(gold in offered.get(task.id, set()))
        tally.add(f"candidate_recall@{k}", hit)
        tally.add(f"candidate_recall@{k}/{'dependent' if task.needs else 'root'}", hit)
    for prefix in ("", f"{request.type}/"):
        tally.add(f"{prefix}node_f1@{k}", node_f1)
        if request.links:
            tally.add(f"{prefix}link_f1@{k}", link_f1)


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


def build_index(
    data: Dataset, encoder: Encoder, *, cache_dir: Path | None, progress: bool
) -> ToolIndex:
    """The catalog's in-process index, document vectors cached on disk."""
    from retriever.bulk import embed_documents
    from retriever.catalog import catalog_documents
    from retriever.index import ToolIndex

    documents = catalog_documents(data.tools, RetrieverConfig())
    vectors = embed_documents(
        encoder, [d.text for d in documents], cache_dir=cache_dir, progress=progress,
        label=f"embedding {len(documents)} tools",
    )  # fmt: skip
    return ToolIndex(documents, vectors)


def evaluate(
    data: Dataset,
    encoder: Encoder,
    ks: Sequence[int],
    policies: Sequence[str],
    *,
    cache_dir: Path | None,
    planner: Planner | None = None,
    progress: bool = True,
) -> dict[str, dict[str, float]]:
    """Scores per policy; the graph's edge bonuses come from ``planner``."""
    from proxy.plan.candidates import CandidateFinder, weights_from
    from proxy.plan.policy import plan_without_llm
    from retriever.bulk import embed_documents

    index = build_index(data, encoder, cache_dir=cache_dir, progress=progress)
    texts = sorted({t.text for r in data.requests for t in r.subtasks})
    matrix = embed_documents(
        encoder, texts, cache_dir=cache_dir, progress=progress, label="embedding sub-tasks"
    )
    vector_of: dict[str, Vectors] = {text: matrix[i] for i, text in enumerate(texts)}
    results: dict[str, dict[str, float]] = {}
    for policy in policies:
        mode, beam = _selection(policy, planner)
        weights = weights_from(planner) if planner is not None else None
        finder = CandidateFinder(data.store, index, weights, mode=mode)
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
            )
            score_plan(plan, request, tally, k)
            if policy != "retrieval":
                score_gold_predecessors(finder, request, vectors, tally, k)
        scores = tally.means()
        scores.update({"llm_calls": 0.0, "llm_tokens": 0.0})
        results[policy] = scores
    return results


def _selection(policy: str, planner: Planner | None) -> tuple[GraphMode, int]:
    """The graph mode and beam a policy names; ``default`` is the proxy's own settings."""
    if policy == "default":
        return (planner.graph_mode, planner.beam) if planner else ("rerank", BEAM)
    beam = BEAM if policy in ("graph-beam", "graph-rerank") else 0
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
        progress=not args.quiet,
    )
    for policy in [p for p in policies if p in LLM_POLICIES]:
        from eval.plan_llm import evaluate_llm

        index = build_index(data, encoder, cache_dir=args.cache_dir, progress=not args.quiet)
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
