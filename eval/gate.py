"""``toolgraph eval gate``: accuracy, precision, recall and F1 of the shipped no-tool gate.

``--data`` holds one ``{"query": str, "needs_tool": bool}`` per line, ``--tools`` the
catalog those labels are relative to: a JSON list of ``{"name", "description"}``.
The gate decides at a shipped threshold (``--at``: the balanced one orchestrate mode
uses, or the confident one it uses when the planner triages), and, for a gate file that
has one, at the catalog's cutoff (``retriever/gate/cutoff.py``); ``--weights`` scores
another gate, named as ``retriever.gate_weights`` names one: ``coverage``, or the path
of a gate file. Nothing is fitted on the file scored.
Precision, recall and F1 are those of "needs a tool".
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from retriever.config import GateWeightsName, gate_weights_choice
from retriever.documents import function_fields

if TYPE_CHECKING:
    from proxy.config import Settings
    from retriever.gate.model import ThresholdChoice

#: Queries per forward pass.
BATCH = 64


class BadInput(ValueError):
    """A data or tools file that is not what the command reads."""


@dataclass(frozen=True)
class Labelled:
    query: str
    needs_tool: bool


def add_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``gate`` under the ``eval`` command that eval.retrieval declares."""
    eval_parser = commands.choices["eval"]
    actions = next(a for a in eval_parser._actions if isinstance(a, argparse._SubParsersAction))
    gate = actions.add_parser("gate", help="accuracy, precision, recall, F1 of the no-tool gate")
    gate.add_argument("--config", type=Path, help="YAML settings file")
    gate.add_argument("--data", type=Path, required=True,
                      help='JSON lines: {"query": str, "needs_tool": bool}')  # fmt: skip
    gate.add_argument("--tools", type=Path, required=True,
                      help='the catalog: a JSON list of {"name", "description"}')  # fmt: skip
    gate.add_argument("--at", choices=("balanced", "confident"), default="balanced",
                      help="the shipped threshold to decide at: balanced (orchestrate mode's), "
                      "confident (its refusal edge when the planner triages)")  # fmt: skip
    gate.add_argument("--weights", default="shipped",
                      help="the gate to score, as retriever.gate_weights names it: shipped "
                      "(default), coverage, or the path of a gate file")  # fmt: skip
    gate.add_argument("--json", type=Path, help="write the scores here as JSON")
    gate.add_argument("--quiet", action="store_true", help="no progress")


def run_command(args: argparse.Namespace, settings: Settings, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    try:
        weights = read_weights(args.weights, "--weights")
        rows = read_data(args.data)
        tools = read_tools(args.tools)
    except BadInput as exc:
        print(f"toolgraph: {exc}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    predicted, threshold, cutoff = decide(
        rows, tools, settings, progress=not args.quiet, at=args.at, weights=weights
    )
    scores = score([row.needs_tool for row in rows], predicted)
    took = time.perf_counter() - started
    print(
        f"{len(rows)} requests, {len(tools)} tools, threshold {threshold:.2f} "
        f"({args.weights}, {args.at}), catalog cutoff {cutoff:.2f}, "
        f"{took:.1f} s",
        file=out,
    )
    print("  ".join(f"{name} {value:.4f}" for name, value in scores.items()), file=out)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(scores, indent=2) + "\n")
    return 0


def decide(
    rows: list[Labelled],
    tools: list[dict[str, str]],
    settings: Settings,
    progress: bool,
    at: ThresholdChoice = "balanced",
    weights: GateWeightsName | Path = "shipped",
) -> tuple[list[bool], float, float]:
    """The gate's decision for every row, against ``tools``, the threshold it decided at
    (``at``: one of the gate file's own, never fitted here; ``weights``: the gate, as
    ``retriever.gate_weights`` names it) and the catalog's cutoff
    (retriever/gate/cutoff.py; 0: none)."""
    from retriever.embedder import load_encoder
    from retriever.gate.catalog import CatalogGate
    from retriever.gate.features import gate_document
    from retriever.gate.model import load_gate, weights_path

    gate = load_gate(weights_path(weights), at=at)
    encoder = load_encoder(gate.encoder_config(settings.retriever))
    documents = [gate_document(function_fields(tool, tool["name"])) for tool in tools]
    catalog = CatalogGate(gate, encoder, documents)
    decisions: list[bool] = []
    for start in range(0, len(rows), BATCH):
        batch = [row.query for row in rows[start : start + BATCH]]
        vectors = encoder.encode([query or " " for query in batch])
        for query, vector in zip(batch, vectors, strict=True):
            decisions.append(catalog.decide_vector(vector, query).needs_tool)
        if progress:
            print(f"\rgate: {len(decisions)}/{len(rows)}", end="", file=sys.stderr, flush=True)
    if progress:
        print(file=sys.stderr)
    return decisions, gate.threshold, catalog.cutoff if gate.cuts else 0.0


def read_weights(value: str, flag: str) -> GateWeightsName | Path:
    """``flag``'s gate, named as ``retriever.gate_weights`` names one (a name, or a gate
    file's path); :class:`BadInput` saying what it takes otherwise."""
    try:
        return gate_weights_choice(value)
    except ValueError as exc:
        raise BadInput(f"{flag} {value}: {exc}") from None


def score(gold: list[bool], predicted: list[bool]) -> dict[str, float]:
    """Accuracy, and precision, recall and F1 of "needs a tool" (0 where undefined)."""
    true_positive = sum(g and p for g, p in zip(gold, predicted, strict=True))
    precision = true_positive / sum(predicted) if any(predicted) else 0.0
    recall = true_positive / sum(gold) if any(gold) else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    accuracy = sum(g == p for g, p in zip(gold, predicted, strict=True)) / len(gold)
    return {"accuracy": accuracy, "precision": precision, "recall": recall, "f1": f1}


def read_data(path: Path) -> list[Labelled]:
    """The labelled requests, or :class:`BadInput` naming the first bad line."""
    rows = []
    for number, line in enumerate(_lines(path), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BadInput(f"{path} line {number} is not JSON: {exc.msg}") from None
        if not isinstance(item, dict) or not isinstance(item.get("query"), str):
            raise BadInput(f'{path} line {number}: "query" must be a string')
        if not isinstance(item.get("needs_tool"), bool):
            raise BadInput(f'{path} line {number}: "needs_tool" must be true or false')
        rows.append(Labelled(item["query"], item["needs_tool"]))
    if not rows:
        raise BadInput(f"{path} holds no requests")
    return rows


def read_tools(path: Path) -> list[dict[str, str]]:
    """The catalog, or :class:`BadInput` naming the first bad entry."""
    try:
        tools = json.loads("\n".join(_lines(path)))
    except json.JSONDecodeError as exc:
        raise BadInput(f"{path} is not JSON: {exc.msg} (line {exc.lineno})") from None
    if not isinstance(tools, list):
        raise BadInput(f'{path} must hold a JSON list of {{"name", "description"}}')
    for number, tool in enumerate(tools):
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str) or not tool["name"]:
            raise BadInput(f'{path} entry {number}: "name" must be a non-empty string')
        if not isinstance(tool.get("description", ""), str):
            raise BadInput(f'{path} entry {number}: "description" must be a string')
    return [{"name": t["name"], "description": t.get("description", "")} for t in tools]


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"cannot read {path}: {exc}") from None
