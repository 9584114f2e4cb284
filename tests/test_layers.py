"""The import graph keeps its shape: layers import only downwards, and nothing imports in a circle.

Inside ``proxy/`` the layers are, bottom to top (docs/architecture.md draws them):

    core    config/, errors, context, metrics, kv, sse, llm, modes (the interface every mode
            implements), protocol/ (the wire), upstream/ (the upstream client)
    engine  encoder/, catalog/, plan/, execute/, tools/ (packs/, sandbox/), mcp/
                                                        (what a request is turned into)
    modes   chat/ (passthrough), select/, orchestrate/, registry/, relayed/, responses_api/
                                                        (one service per mode or API)
    web     routers, middleware, auth, app, services, cli, http_responses, console/,
            mcp_server/                                 (HTTP and process edges)

A module may import from its own layer and the ones below it, never above. Across the
top level, ``graph_store`` sits below ``retriever``, both below ``proxy``, then
``testing`` (the fake upstream and server launchers, not installed), and ``eval`` above
everything: nothing under ``proxy/``, ``retriever/`` or ``graph_store/`` imports
``testing`` or ``eval``, and what ``toolgraph eval`` loads imports nothing of
``testing``. Every import counts, including those inside functions and under
``TYPE_CHECKING``: a lazy import hides an arrow, it does not remove it.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("core", "engine", "modes", "web")
TOP_LEVEL = ("graph_store", "retriever", "proxy", "testing", "eval")

# Longest prefix wins. Feature folders keep their thin router beside their service
# (STYLE.md), so routers are placed by name, not by folder.
_PLACES = {
    "proxy": "core",
    "proxy.config": "core",
    "proxy.modes": "core",
    "proxy.errors": "core",
    "proxy.context": "core",
    "proxy.metrics": "core",
    "proxy.kv": "core",
    "proxy.sse": "core",
    "proxy.llm": "core",
    "proxy.json_codec": "core",
    "proxy.masking": "core",
    "proxy.protocol": "core",
    "proxy.upstream": "core",
    "proxy.tenancy": "core",
    "proxy.browser_guard": "web",
    "proxy.tenancy.command": "web",
    "proxy.plan": "engine",
    "proxy.learning": "engine",
    "proxy.learning.command": "web",
    "proxy.execute": "engine",
    "proxy.tools": "engine",
    "proxy.tools.packs": "engine",
    "proxy.tools.sandbox": "engine",
    "proxy.mcp": "engine",
    "proxy.encoder": "engine",
    "proxy.catalog": "engine",
    "proxy.chat": "modes",
    "proxy.select": "modes",
    "proxy.orchestrate": "modes",
    "proxy.registry": "modes",
    "proxy.relayed": "modes",
    "proxy.responses_api": "modes",
    "proxy.mcp_server": "web",
    "proxy.console": "web",
    "proxy.app": "web",
    "proxy.openapi": "web",
    "proxy.services": "web",
    "proxy.readiness": "web",
    "proxy.cli": "web",
    "proxy.catalog.command": "web",
    "proxy.tools_command": "web",
    "proxy.__main__": "web",
    "proxy.middleware": "web",
    "proxy.auth": "web",
    "proxy.health": "web",
    "proxy.models_router": "web",
    "proxy.http_responses": "web",
    "proxy.disconnect": "web",
    "proxy.streaming": "web",
    "proxy.reference": "web",
    "proxy.logs": "web",
}


def layer_of(module: str) -> str:
    if module.rsplit(".", 1)[-1] == "router":
        return "web"
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        place = _PLACES.get(".".join(parts[:end]))
        if place is not None:
            return place
    raise AssertionError(
        f"{module} has no layer: add it to tests/test_layers.py and docs/architecture.md"
    )


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for top in TOP_LEVEL:
        for path in sorted((ROOT / top).rglob("*.py")):
            found[_module_name(path)] = path
    return found


def _imported(
    node: ast.AST, module: str, is_package: bool, known: dict[str, Path]
) -> Iterator[str]:
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            package = module.split(".")
            package = package if is_package else package[:-1]
            package = package[: len(package) - node.level + 1]
            base = ".".join([*package, base] if base else package)
        for alias in node.names:
            # ``from proxy import metrics`` imports the module proxy.metrics, not proxy
            submodule = f"{base}.{alias.name}"
            yield submodule if submodule in known else base


def import_graph() -> dict[str, set[str]]:
    known = _modules()
    graph: dict[str, set[str]] = defaultdict(set)
    for module, path in known.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            for target in _imported(node, module, is_package, known):
                if target.split(".")[0] in TOP_LEVEL and target != module:
                    graph[module].add(_nearest_known(target, known))
        graph.setdefault(module, set())
    return graph


def _nearest_known(target: str, known: dict[str, Path]) -> str:
    parts = target.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in known:
            return ".".join(parts[:end])
    return target


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _package(module: str) -> str:
    """The feature folder a module belongs to (``proxy.plan.search`` → ``proxy.plan``); a
    folder's router is a node of its own, as it sits a layer above the folder's service."""
    parts = module.split(".")
    if parts[-1] == "router":
        return module
    return ".".join(parts[:2]) if parts[0] == "proxy" else parts[0]


def test_proxy_layers_import_only_downwards() -> None:
    upward = [
        f"{source} ({layer_of(source)}) imports {target} ({layer_of(target)})"
        for source, targets in import_graph().items()
        if source.startswith("proxy")
        for target in sorted(targets)
        if target.startswith("proxy")
        and LAYERS.index(layer_of(target)) > LAYERS.index(layer_of(source))
    ]
    assert upward == [], "\n".join(upward)


def test_top_level_packages_import_only_downwards() -> None:
    upward = [
        f"{source} imports {target}"
        for source, targets in import_graph().items()
        for target in sorted(targets)
        if TOP_LEVEL.index(target.split(".")[0]) > TOP_LEVEL.index(source.split(".")[0])
    ]
    assert upward == [], "\n".join(upward)


def test_the_installed_eval_command_needs_nothing_of_testing() -> None:
    # testing/ is not in the wheel: the commands `toolgraph eval` adds must not reach it.
    graph = import_graph()
    reached, todo = set(), ["eval.cli"]
    while todo:
        module = todo.pop()
        if module not in reached:
            reached.add(module)
            todo.extend(graph.get(module, ()))
    assert {"eval.retrieval", "proxy.config"} <= reached
    assert sorted(m for m in reached if m.startswith("testing")) == []


def test_no_module_imports_in_a_circle() -> None:
    assert _cycles(import_graph()) == []


def test_no_two_feature_folders_import_each_other() -> None:
    packages: dict[str, set[str]] = defaultdict(set)
    for source, targets in import_graph().items():
        for target in targets:
            if _package(target) != _package(source):
                packages[_package(source)].add(_package(target))
        packages.setdefault(_package(source), set())
    assert _cycles(packages) == []


def test_the_checker_sees_an_upward_import_and_a_circle() -> None:
    # The checks above pass on an empty graph too; this one proves they can fail.
    assert layer_of("proxy.plan.search") == "engine"
    assert layer_of("proxy.orchestrate.router") == "web"
    assert layer_of("proxy.kv") == "core"
    assert layer_of("proxy.config.loader") == "core"
    assert layer_of("proxy.relayed.service") == "modes"
    assert layer_of("proxy.responses_api.translation.events") == "modes"
    assert layer_of("proxy.http_responses") == "web"
    assert layer_of("proxy.encoder.service") == "engine"
    assert layer_of("proxy.catalog.loader") == "engine"
    assert layer_of("proxy.catalog.command") == "web"
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
    graph = import_graph()
    assert "proxy.config" in graph["proxy.app"]
    assert "proxy.json_codec" in graph["proxy.errors"]  # from proxy import json_codec
