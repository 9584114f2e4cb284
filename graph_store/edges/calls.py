"""SEQUENTIAL edges and availability from logs of real calls.

A log is JSON lines, one path per line: ``{"calls": [...]}`` where a call is a tool
name or ``{"name", "error"?, "pruned"?, "ok"?}``, with the path's outcome in
``final_answer_given`` (ToolBench's ``call_sequences.jsonl``) or ``finish_type``.
The thesis's cleaning (METHOD.md §1): keep paths that gave an answer (drop
``give_up``), keep only unpruned steps that did not return an error, drop the
``Finish`` pseudo-call. Consecutive calls of the same tool are one step. A call to a
tool the catalog does not know breaks the path there: the tools on either side of it
were not called one right after the other.

Weight of A→B = count(A→B) / count(A→anything), with the count kept. Availability of a
tool, where its calls say whether they succeeded: (successes + 1) / (calls + 2).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from graph_store.errors import InvalidItem
from graph_store.ingest._common import read_json_lines
from graph_store.models import Edge, EdgeKind
from graph_store.store import GraphStore

ORIGIN = "calls"
_PSEUDO_CALLS = {"Finish", "finish"}


@dataclass
class CallReport:
    paths: int = 0
    kept_paths: int = 0
    calls: int = 0
    unknown: Counter[str] = field(default_factory=Counter)
    errors: list[InvalidItem] = field(default_factory=list)


@dataclass
class CallGraph:
    edges: list[Edge]
    availability: dict[str, float]
    report: CallReport


def edges_from_calls(store: GraphStore, files: Iterable[Path]) -> CallGraph:
    report = CallReport()
    pairs: Counter[tuple[str, str]] = Counter()
    outcomes: dict[str, list[bool]] = defaultdict(list)
    resolve = _Resolver(store)
    for path in files:
        for number, row in read_json_lines(path):
            if isinstance(row, InvalidItem):
                report.errors.append(row)
                continue
            steps = _clean(path, number, row, report)
            if steps is None:
                continue
            for name, ok in steps:
                tool = resolve(name)
                if tool is not None and ok is not None:
                    outcomes[tool].append(ok)
            ids = [resolve(name) if ok is not False else None for name, ok in steps]
            report.unknown.update(name for name, _ in steps if resolve(name) is None)
            pairs.update(_consecutive(ids))
    return CallGraph(_weighted(pairs), _availability(outcomes), report)


def _clean(
    path: Path, number: int, row: object, report: CallReport
) -> list[tuple[str, bool | None]] | None:
    """The path's steps as (name, succeeded or unknown), or None when it is dropped."""
    report.paths += 1
    calls = row.get("calls") if isinstance(row, dict) else None
    if not isinstance(row, dict) or not isinstance(calls, list):
        report.errors.append(InvalidItem(str(path), f"line {number}", "needs a 'calls' list"))
        return None
    if row.get("final_answer_given") is False or row.get("finish_type") == "give_up":
        return None
    report.kept_paths += 1
    steps: list[tuple[str, bool | None]] = []
    for call in calls:
        name, ok = _step(call)
        if name is None or name in _PSEUDO_CALLS:
            continue
        report.calls += 1
        steps.append((name, ok))
    return steps


def _step(call: object) -> tuple[str | None, bool | None]:
    if isinstance(call, str):
        return call, None
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        return None, None
    if call.get("pruned"):
        return None, None
    if call.get("error") or call.get("ok") is False:
        return call["name"], False
    return call["name"], True if ("ok" in call or "error" in call) else None


def _consecutive(ids: list[str | None]) -> Iterable[tuple[str, str]]:
    previous: str | None = None
    for tool in ids:
        if tool is not None and previous is not None and tool != previous:
            yield previous, tool
        if tool != previous:
            previous = tool


def _weighted(pairs: Counter[tuple[str, str]]) -> list[Edge]:
    leaving: Counter[str] = Counter()
    for (src, _), count in pairs.items():
        leaving[src] += count
    return [
        Edge(
            src=src,
            dst=dst,
            kind=EdgeKind.SEQUENTIAL,
            weight=count / leaving[src],
            count=count,
            origin=ORIGIN,
        )
        for (src, dst), count in sorted(pairs.items())
    ]


def _availability(outcomes: dict[str, list[bool]]) -> dict[str, float]:
    return {tool: (sum(oks) + 1) / (len(oks) + 2) for tool, oks in outcomes.items()}


class _Resolver:
    """Call names to tool ids, each name looked up once."""

    def __init__(self, store: GraphStore) -> None:
        self._store = store
        self._seen: dict[str, str | None] = {}

    def __call__(self, name: str) -> str | None:
        if name not in self._seen:
            tool = self._store.get_tool(name)
            self._seen[name] = tool.id if tool is not None else None
        return self._seen[name]
