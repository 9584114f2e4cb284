"""The end-to-end figures: per arm and catalog size, a markdown table and a plot."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

ARM_LABELS = {
    "orchestrate": "(a) toolgraph orchestrate",
    "all_tools": "(b) all tools",
    "no_tools": "(c) no tools",
    "select": "(d) select mode",
    "tool_search": "(e) tool_search",
}
#: The arms drawn as lines over the catalog sizes (no tools is one level, drawn flat).
LINE_ARMS = ("orchestrate", "all_tools", "select", "tool_search")
KINDS = ("single", "multi", "none", "bfcl", "database", "graph")
KIND_LABELS = {"none": "no-tool", "bfcl": "BFCL", "graph": "graph"}
DEFAULT_KINDS = KINDS[:4]  # the default suite's columns, whatever its rows hold


def summarise(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One line per (arm, catalog size), in the order the rows first name them."""
    groups: dict[tuple[str, int], list[Mapping[str, Any]]] = {}
    for row in rows:
        groups.setdefault((str(row["arm"]), int(row["catalog"])), []).append(row)
    return [_line(arm, size, group) for (arm, size), group in groups.items()]


def _line(arm: str, size: int, rows: list[Mapping[str, Any]]) -> dict[str, Any]:
    correct = sum(1 for row in rows if row["correct"])
    prompt = sum(int(row["prompt_tokens"]) for row in rows)
    completion = sum(int(row["completion_tokens"]) for row in rows)
    by_kind = {}
    for kind in KINDS:
        of_kind = [row for row in rows if row["kind"] == kind]
        if of_kind:
            by_kind[kind] = [sum(1 for row in of_kind if row["correct"]), len(of_kind)]
    overflow = sum(1 for row in rows if "context_length_exceeded" in str(row["error"]))
    return {
        "arm": arm,
        "catalog": size,
        "tasks": len(rows),
        "correct": correct,
        "accuracy": round(correct / len(rows), 3),
        "by_kind": by_kind,
        "median_seconds": round(statistics.median(float(row["seconds"]) for row in rows), 1),
        "prompt_tokens_per_task": round(prompt / len(rows)),
        "completion_tokens_per_task": round(completion / len(rows)),
        "tokens_per_correct": round((prompt + completion) / correct) if correct else None,
        "tool_calls_per_task": round(sum(len(row["tool_calls"]) for row in rows) / len(rows), 2),
        "errors": sum(1 for row in rows if row["error"]),
        "context_overflows": overflow,
    }


def markdown(lines: Sequence[Mapping[str, Any]]) -> str:
    kinds = _kinds(lines)
    head = (
        f"| arm | catalog | correct | {' / '.join(KIND_LABELS.get(k, k) for k in kinds)} "
        "| median s | prompt tok/task "
        "| completion tok/task | tokens per correct | tool calls/task | errors |\n"
        "|---|---:|---:|---|---:|---:|---:|---:|---:|---|\n"
    )
    return head + "".join(_markdown_line(line, kinds) + "\n" for line in lines)


def _kinds(lines: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """The default suite's four kinds, or the pack suite's two when only they ran."""
    present = {kind for line in lines for kind in line["by_kind"]}
    if present and present <= {"database", "graph"}:
        return ("database", "graph")
    return DEFAULT_KINDS + tuple(k for k in KINDS[4:] if k in present)


def _markdown_line(line: Mapping[str, Any], kinds: Sequence[str]) -> str:
    cells = " / ".join(
        f"{line['by_kind'][kind][0]}/{line['by_kind'][kind][1]}" if kind in line["by_kind"] else "-"
        for kind in kinds
    )
    errors = str(line["errors"])
    if line["context_overflows"]:
        errors += f" ({line['context_overflows']} context overflow)"
    per_correct = line["tokens_per_correct"]
    return (
        f"| {ARM_LABELS.get(line['arm'], line['arm'])} | {line['catalog'] or '-'} "
        f"| {line['correct']}/{line['tasks']} | {cells} | {line['median_seconds']} "
        f"| {line['prompt_tokens_per_task']:,} | {line['completion_tokens_per_task']:,} "
        f"| {f'{per_correct:,}' if per_correct is not None else '-'} "
        f"| {line['tool_calls_per_task']} | {errors} |"
    )


def plot(lines: Sequence[Mapping[str, Any]], path: Path, title: str) -> None:
    """Accuracy and prompt tokens per task against the catalog size, one line per arm."""
    figure = Figure(figsize=(10, 4))
    accuracy, tokens = figure.subplots(1, 2)
    for arm in LINE_ARMS:
        points = sorted((line["catalog"], line) for line in lines if line["arm"] == arm)
        if not points:
            continue
        sizes = [size for size, _ in points]
        label = ARM_LABELS[arm]
        accuracy.plot(sizes, [line["accuracy"] for _, line in points], marker="o", label=label)
        # a size where every request overflowed the context has no tokens to draw: it is
        # left out of the line and marked where the line would go off the top
        read = [(size, line) for size, line in points if line["prompt_tokens_per_task"] > 0]
        drawn = tokens.plot(
            [size for size, _ in read],
            [line["prompt_tokens_per_task"] for _, line in read],
            marker="o",
            label=label,
        )
        for size, line in points:
            if line["prompt_tokens_per_task"] == 0 and line["context_overflows"]:
                tokens.annotate(
                    "context\noverflow", (size, 1.0), xycoords=("data", "axes fraction"),
                    ha="center", va="top", fontsize=8, color=drawn[0].get_color(),
                )  # fmt: skip
    for line in lines:
        if line["arm"] == "no_tools":
            accuracy.axhline(
                line["accuracy"], color="grey", linestyle="--", label=ARM_LABELS["no_tools"]
            )
            tokens.axhline(line["prompt_tokens_per_task"], color="grey", linestyle="--")
    for axes in (accuracy, tokens):
        axes.set_xscale("log")
        axes.set_xlabel("tools in the catalog")
    accuracy.set_ylabel("share of tasks answered correctly")
    accuracy.set_ylim(0, 1.05)
    accuracy.legend(fontsize=8)
    tokens.set_ylabel("prompt tokens per task")
    tokens.set_yscale("log")
    figure.suptitle(title, fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
