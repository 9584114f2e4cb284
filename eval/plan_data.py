"""Planning data sets in TaskBench's format, and how a plan is scored against one.

:mod:`eval.plan_eval` (the LLM-free policies) and :mod:`eval.plan_llm` (the LLM
planners) both read and score through this module; neither imports the other's
runner. The folder format and the metrics are described in :mod:`eval.plan_eval`.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from graph_store.embedded import InProcessStore
from graph_store.ingest.taskbench import parse_links, parse_taskbench
from graph_store.models import Tool
from proxy.plan.model import Plan, SubTask, subtask_problems

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
