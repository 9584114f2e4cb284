"""Precision of the schema rule pass (graph_store.edges.schema_deps) on hand labels.

    python -m eval.schema_deps_precision                 # precision on the labels
    python -m eval.schema_deps_precision --sample 40     # print unlabelled edges to label

The catalogs are the ToolBench corpus and Seal-Tools from ../shared/data. A label is a
JSON line ``{"sample", "catalog", "src", "dst", "reason", "kind", "correct", "note"}``:
correct means A's output field really is a value B's input takes (same entity, same
meaning), so that a planner could pass it along. Each sample was drawn at random from
the edges the rules made at the time; a sample drawn after a rule change is the honest
figure for the rules as they are.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from graph_store.edges.schema_deps import schema_edges
from graph_store.ingest.catalog import import_paths
from graph_store.memory import InProcessStore
from graph_store.models import Edge, Tool

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
LABELS = REPO / "eval" / "data" / "schema_dep_labels.jsonl"
CATALOGS = {
    "toolbench": DATA / "toolbench_stable" / "corpus.jsonl.gz",
    "seal": DATA / "extras" / "seal_tools" / "tool.jsonl.gz",
}


def catalog_edges(name: str) -> tuple[dict[str, Tool], list[Edge]]:
    store = InProcessStore()
    import_paths(store, [CATALOGS[name]])
    tools = store.list_tools()
    return {tool.id: tool for tool in tools}, schema_edges(tools)


def describe(tools: dict[str, Tool], edge: Edge) -> dict[str, object]:
    src, dst = tools[edge.src], tools[edge.dst]
    param = edge.reason.split(" -> ")[1]
    return {
        "src": src.name,
        "dst": dst.name,
        "reason": edge.reason,
        "kind": edge.kind.value,
        "src_description": src.description[:160],
        "dst_description": dst.description[:160],
        "param": dst.param_schemas().get(param, {}),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=int, default=0, help="print this many edges per catalog")
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args()
    labels = (
        [json.loads(line) for line in LABELS.read_text().splitlines()] if LABELS.exists() else []
    )
    for name in CATALOGS:
        tools, edges = catalog_edges(name)
        print(f"{name}: {len(edges)} edges from {len(tools)} tools")
        if args.sample:
            for edge in random.Random(args.seed).sample(edges, args.sample):
                print(json.dumps({"catalog": name, **describe(tools, edge)}, ensure_ascii=False))
            continue
        made = {(tools[e.src].name, tools[e.dst].name, e.reason) for e in edges}
        mine = [label for label in labels if label["catalog"] == name]
        for sample in sorted({label["sample"] for label in mine}):
            drawn = [label for label in mine if label["sample"] == sample]
            still = [x for x in drawn if (x["src"], x["dst"], x["reason"]) in made]
            right = sum(label["correct"] for label in still)
            share = f"{100 * right / len(still):.0f}%" if still else "n/a"
            print(
                f"  {sample}: precision {share} ({right}/{len(still)} labelled edges the rules "
                f"still make; {len(drawn) - len(still)} labelled edges no longer made)"
            )


if __name__ == "__main__":
    main()
