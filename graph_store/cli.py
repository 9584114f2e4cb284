"""``toolgraph catalog …`` and ``toolgraph graph …``: the catalog and graph from a shell.

:func:`add_commands` adds the subcommands to the ``toolgraph`` parser and
:func:`run_command` runs them with the loaded settings. Every failure ends as one line
on stderr and a non-zero exit: 1 when some input was bad (after the rest was stored),
2 when nothing could be done.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from graph_store.edges.build import build_graph
from graph_store.edges.llm_deps import Judge, LlmReport, openai_judge
from graph_store.embedded import InProcessStore
from graph_store.errors import GraphStoreError, InvalidItem, JudgeUnavailable
from graph_store.ingest.catalog import FORMATS, import_paths
from graph_store.models import ALL_KINDS, Direction, EdgeKind
from graph_store.store import GraphStore, expand, graph_stats, neighbors, open_store

COMMANDS = ("catalog", "graph")
_SHOWN_ERRORS = 20


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    catalog = command_parser(commands, "catalog", "import, list and show the tool catalog")
    actions = catalog.add_subparsers(dest="action", required=True)
    imported = command_parser(actions, "import", "import tools from files or folders")
    imported.add_argument("paths", nargs="+", type=Path, metavar="PATH")
    imported.add_argument("--format", choices=FORMATS, help="skip format detection")
    listed = command_parser(actions, "list", "list tools by name")
    listed.add_argument("--category")
    listed.add_argument("--limit", type=int, default=50)
    shown = command_parser(actions, "show", "one tool as JSON")
    shown.add_argument("tool", help="name, id or ToolBench alias")

    graph = command_parser(commands, "graph", "build and explore the tool graph")
    actions = graph.add_subparsers(dest="action", required=True)
    build = command_parser(actions, "build", "build edges (each source replaces its own edges)")
    build.add_argument("--calls", nargs="+", type=Path, default=[], metavar="FILE")
    build.add_argument("--schema-deps", action="store_true", help="the response→input rules")
    build.add_argument("--taskbench-graph", nargs="+", type=Path, default=[], metavar="FILE")
    build.add_argument(
        "--llm-deps", action="store_true", help="have the upstream model judge the rule edges"
    )
    build.add_argument("--llm-model", help="model for --llm-deps (default: upstream_model)")
    command_parser(actions, "stats", "counts, degrees, components")
    for name, text in (("push", "copy the local graph to Neo4j"), ("pull", "copy Neo4j here")):
        transfer = command_parser(actions, name, text)
        transfer.add_argument("--neo4j", required=True, metavar="URI")
    near = command_parser(actions, "neighbors", "tools next to a tool, best first")
    near.add_argument("tool")
    near.add_argument("--kind", choices=[k.value for k in EdgeKind], action="append")
    near.add_argument("--category")
    near.add_argument("--limit", type=int, default=20)
    near.add_argument("--hops", type=int, default=1)
    near.add_argument("--incoming", action="store_true", help="tools that lead to it")


@dataclass(frozen=True, slots=True)
class StoreCommandSettings:
    """What the commands read of toolgraph's settings: where the store is, and the
    OpenAI-compatible endpoint that ``graph build --llm-deps`` asks."""

    data_dir: Path
    neo4j_uri: str | None
    upstream_base_url: str
    upstream_api_key: str | None
    upstream_model: str | None
    upstream_read_timeout: float
    #: Tools the catalog leaves out (an MCP server's that is not connected): not listed.
    left_out: frozenset[str] = frozenset()


def run_command(
    args: argparse.Namespace, settings: StoreCommandSettings, out: TextIO | None = None
) -> int:
    out = out or sys.stdout
    try:
        if args.action in ("push", "pull"):
            return _transfer(args, settings, out)
        args.settings = settings
        store = open_store(settings.data_dir, settings.neo4j_uri)
        try:
            return _HANDLERS[(args.command, args.action)](args, store, out)
        finally:
            store.close()
    except GraphStoreError as exc:
        print(f"toolgraph: {exc}", file=sys.stderr)
        return 2


def command_parser(
    parent: argparse._SubParsersAction[argparse.ArgumentParser], name: str, text: str
) -> argparse.ArgumentParser:
    """A subcommand of ``toolgraph`` other than ``serve``: it takes ``--config`` only."""
    parser = parent.add_parser(name, help=text, description=text)
    parser.add_argument("--config", type=Path, help="YAML settings file")
    # main() loads settings with the serve command's overrides; these have none.
    parser.set_defaults(host=None, port=None, workers=None)
    return parser


def _import(args: argparse.Namespace, store: GraphStore, out: TextIO) -> int:
    report = import_paths(store, args.paths, args.format, _progress_bar(sys.stderr))
    _print_errors(report.errors)
    print(report.summary(), file=out)
    return 1 if report.errors else 0


def _list(args: argparse.Namespace, store: GraphStore, out: TextIO) -> int:
    left_out: frozenset[str] = args.settings.left_out
    tools = [tool for tool in store.list_tools(args.category) if tool.name not in left_out]
    for tool in tools[: args.limit]:
        print(f"{tool.name}\t{tool.category}/{tool.group}\t{tool.description[:80]}", file=out)
    return 0


def _show(args: argparse.Namespace, store: GraphStore, out: TextIO) -> int:
    tool = store.get_tool(args.tool)
    if tool is None:
        print(f"toolgraph: no tool named or with id {args.tool!r}", file=sys.stderr)
        return 1
    print(tool.model_dump_json(indent=2), file=out)
    return 0


def _build(args: argparse.Namespace, store: GraphStore, out: TextIO) -> int:
    if not (args.calls or args.schema_deps or args.taskbench_graph or args.llm_deps):
        print(
            "toolgraph: give --calls, --schema-deps, --taskbench-graph or --llm-deps",
            file=sys.stderr,
        )
        return 2
    judge = _judge(args) if args.llm_deps else None
    report = build_graph(store, args.calls, args.schema_deps, args.taskbench_graph, judge)
    if report.llm is not None:
        _record_verdicts(args.settings.data_dir / "graph" / "llm_verdicts.jsonl", report.llm)
    _print_errors(report.errors)
    print(report.summary(), file=out)
    return 1 if report.errors else 0


def _judge(args: argparse.Namespace) -> Judge:
    settings: StoreCommandSettings = args.settings
    model = args.llm_model or settings.upstream_model
    if not model:
        raise JudgeUnavailable("--llm-deps needs --llm-model or the upstream_model setting")
    return openai_judge(
        settings.upstream_base_url, settings.upstream_api_key, model, settings.upstream_read_timeout
    )


def _record_verdicts(path: Path, report: LlmReport) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as log:
        for verdict in report.verdicts:
            row = {
                "src": verdict.edge.src,
                "dst": verdict.edge.dst,
                "kind": verdict.edge.kind.value,
                "reason": verdict.edge.reason,
                "keep": verdict.keep,
                "why": verdict.why,
            }
            log.write(json.dumps(row) + "\n")


def _stats(args: argparse.Namespace, store: GraphStore, out: TextIO) -> int:
    stats = graph_stats(store)
    print(f"tools {stats.tools}, groups {stats.groups}, categories {stats.categories}", file=out)
    print("edges " + ", ".join(f"{k} {v}" for k, v in stats.edges.items()), file=out)
    print(f"components {stats.components}, largest {stats.largest_component}", file=out)
    degrees = ", ".join(f"{degree}:{count}" for degree, count in stats.out_degree.items())
    print(f"out-degree (degree:tools) {degrees}", file=out)
    return 0


def _neighbors(args: argparse.Namespace, store: GraphStore, out: TextIO) -> int:
    tool = store.get_tool(args.tool)
    if tool is None:
        print(f"toolgraph: no tool named or with id {args.tool!r}", file=sys.stderr)
        return 1
    kinds = [EdgeKind(k) for k in args.kind] if args.kind else list(ALL_KINDS)
    direction: Direction = "in" if args.incoming else "out"
    if args.hops > 1:
        reached = expand(
            store, [tool.id], args.hops, kinds, category=args.category, direction=direction
        )
        for tool_id, hops in sorted(reached.items(), key=lambda item: item[1])[1 : args.limit + 1]:
            found = store.get_tool(tool_id)
            print(f"{hops}\t{found.name if found else tool_id}", file=out)
        return 0
    near = neighbors(store, [tool.id], kinds, category=args.category, direction=direction)
    for n in near[: args.limit]:
        print(f"{n.kind.value}\t{n.weight:.3f}\t{n.count}\t{n.name}\t{n.resource}", file=out)
    return 0


def _transfer(args: argparse.Namespace, settings: StoreCommandSettings, out: TextIO) -> int:
    local: GraphStore = InProcessStore.open(settings.data_dir / "graph")
    remote = open_store(settings.data_dir, args.neo4j)
    source, target = (local, remote) if args.action == "push" else (remote, local)
    try:
        target.clear()
        target.upsert_tools(source.list_tools())
        target.upsert_edges(source.edges())
        print(f"copied {target.count_tools()} tools, {len(target.edges())} edges", file=out)
    finally:
        remote.close()
    return 0


def _print_errors(errors: list[InvalidItem]) -> None:
    for error in errors[:_SHOWN_ERRORS]:
        print(f"error: {error}", file=sys.stderr)
    if len(errors) > _SHOWN_ERRORS:
        print(f"… and {len(errors) - _SHOWN_ERRORS} more errors", file=sys.stderr)


def _progress_bar(stream: TextIO) -> Callable[[int, int], None] | None:
    if not stream.isatty():
        return None

    def show(done: int, total: int) -> None:
        filled = 30 * done // max(total, 1)
        end = "\n" if done >= total else ""
        mib = f"{done / 2**20:.1f}/{total / 2**20:.1f} MiB"
        stream.write(f"\r[{'#' * filled}{'.' * (30 - filled)}] {mib}{end}")
        stream.flush()

    return show


_Handler = Callable[[argparse.Namespace, GraphStore, TextIO], int]
_HANDLERS: dict[tuple[str, str], _Handler] = {
    ("catalog", "import"): _import,
    ("catalog", "list"): _list,
    ("catalog", "show"): _show,
    ("graph", "build"): _build,
    ("graph", "stats"): _stats,
    ("graph", "neighbors"): _neighbors,
}
