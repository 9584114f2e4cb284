"""One graph build: each source replaces the edges it made last time, and only those."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from graph_store.edges import calls, llm_deps, schema_deps
from graph_store.errors import InvalidItem
from graph_store.ingest import taskbench
from graph_store.ingest._common import read_json
from graph_store.models import Edge, Tool
from graph_store.names import tool_id
from graph_store.store import GraphStore


@dataclass
class BuildReport:
    edges: dict[str, int] = field(default_factory=dict)  # by origin
    calls: calls.CallReport | None = None
    availability: int = 0
    llm: llm_deps.LlmReport | None = None
    errors: list[InvalidItem] = field(default_factory=list)

    def summary(self) -> str:
        made = ", ".join(f"{count} from {origin}" for origin, count in self.edges.items())
        text = f"edges: {made or 'none'}"
        if self.calls is not None:
            unknown = sum(self.calls.unknown.values())
            text += (
                f"; call paths: {self.calls.kept_paths} of {self.calls.paths} kept, "
                f"{self.calls.calls} calls, {unknown} to tools not in the catalog"
            )
        if self.availability:
            text += f"; availability set for {self.availability} tools"
        if self.llm is not None:
            kept = sum(v.keep for v in self.llm.verdicts)
            text += (
                f"; the model kept {kept} and rejected {len(self.llm.verdicts) - kept} "
                f"candidate edges, {self.llm.unjudged} left unjudged"
            )
        return text + f"; {len(self.errors)} errors"


def build_graph(
    store: GraphStore,
    call_files: Sequence[Path] = (),
    schema: bool = False,
    taskbench_graphs: Sequence[Path] = (),
    judge: llm_deps.Judge | None = None,
) -> BuildReport:
    report = BuildReport()
    if call_files:
        found = calls.edges_from_calls(store, call_files)
        store.replace_edges(calls.ORIGIN, found.edges)
        if found.availability:
            store.set_availability(found.availability)
        report.edges[calls.ORIGIN] = len(found.edges)
        report.calls, report.availability = found.report, len(found.availability)
        report.errors += found.report.errors
    if schema:
        edges = schema_deps.schema_edges(store.list_tools())
        store.replace_edges(schema_deps.ORIGIN, edges)
        report.edges[schema_deps.ORIGIN] = len(edges)
    if judge is not None:
        report.llm = _confirm(store, judge)
    if taskbench_graphs:
        edges = []
        for path in taskbench_graphs:
            try:
                found_edges, errors = taskbench.parse_links(path, _taskbench_tools(store, path))
            except InvalidItem as exc:
                report.errors.append(exc)
                continue
            edges += found_edges
            report.errors += errors
        edges = _deduplicated(edges)
        store.replace_edges(taskbench.FORMAT, edges)
        report.edges[taskbench.FORMAT] = len(edges)
    return report


def _confirm(store: GraphStore, judge: llm_deps.Judge) -> llm_deps.LlmReport:
    """Ask the model about the rule pass's edges it has not judged yet."""
    made = [edge for edge in store.edges() if edge.origin == schema_deps.ORIGIN]
    candidates = [edge for edge in made if not llm_deps.is_judged(edge)]
    kept, report = llm_deps.confirm_edges(store, candidates, judge)
    asked = {edge.key for edge in candidates}
    store.replace_edges(schema_deps.ORIGIN, [edge for edge in made if edge.key not in asked] + kept)
    return report


def _taskbench_tools(store: GraphStore, path: Path) -> dict[str, Tool]:
    """The catalog's tools of the data set ``path`` belongs to, by their TaskBench id."""
    dataset = taskbench.dataset_name(path)
    document = read_json(path)
    nodes = document.get("nodes") if isinstance(document, dict) else None
    names = [str(node.get("id")) for node in nodes or [] if isinstance(node, dict)]
    found = {name: store.get_tool(tool_id(taskbench.FORMAT, dataset, name)) for name in names}
    return {name: tool for name, tool in found.items() if tool is not None}


def _deduplicated(edges: list[Edge]) -> list[Edge]:
    return list({edge.key: edge for edge in edges}.values())
