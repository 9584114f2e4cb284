"""How much compression saves on responses shaped like the ToolBench catalogue's.

    python -m eval.bench_compression [--corpus PATH] [--limit 1024]

The corpus (``../shared/data/toolbench_stable/corpus.jsonl.gz``) holds response
schemas (JSON Schema) for about 12,000 APIs and type templates (``{"id": "int"}``)
for about 600; neither holds real responses. Each becomes one synthetic response
by fixed rules: strings of 24 characters (dates and URLs in their usual shape),
numbers of 6-8 characters, three elements per array, nesting cut at depth 8. On
those it measures, per policy, the characters an LLM would read:

* ``raw``: the response as it is;
* ``truncate``: head-and-tail truncation to the limit (the fallback and baseline);
* ``rules+truncate``: the LLM-free field choice (``rule_based_fields``: drop
  metadata-like fields), then truncation. The LLM's own choice is not measured
  here: no capable model runs on this machine. It is the upper bound of what the
  LLM step must beat, not a substitute for it.

Also: how many responses were over the limit at all, and how many the field choice
alone brought under it (so nothing was cut blindly). Results: a table here and
``eval/results/bench_compression.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import statistics
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import JsonValue

from eval.data_folder import dataset
from graph_store.models import Provenance, Tool
from proxy.execute.compress import Compressor, select_fields, serialize
from proxy.execute.fields import RuleFieldChooser

ROOT = Path(__file__).resolve().parent.parent
CORPUS = dataset("toolbench_stable", "corpus.jsonl.gz")
RESULTS = ROOT / "eval" / "results"
MAX_DEPTH = 8
_TEMPLATE_VALUES: dict[str, JsonValue] = {
    "str": "x" * 24,
    "int": 1234567,
    "float": 12.34567,
    "bool": True,
    "NoneType": None,
}


def example_from_schema(schema: JsonValue, name: str = "", depth: int = 0) -> JsonValue:
    """A deterministic instance of a JSON Schema (the fields, not realistic values)."""
    if not isinstance(schema, dict) or depth > MAX_DEPTH:
        return "x" * 24
    kind = schema.get("type")
    properties = schema.get("properties")
    if kind == "object" or isinstance(properties, dict):
        if not isinstance(properties, dict):
            return {}
        return {key: example_from_schema(sub, key, depth + 1) for key, sub in properties.items()}
    if kind == "array":
        item = example_from_schema(schema.get("items", {}), name, depth + 1)
        return [item, item, item]
    if kind in ("integer", "number"):
        return 1234567 if kind == "integer" else 12.34567
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    lowered = name.lower()
    if "url" in lowered or "link" in lowered or "image" in lowered:
        return "https://example.com/a/b/c.jpg"
    if "date" in lowered or "time" in lowered:
        return "2024-05-01T12:00:00Z"
    return "x" * 24


def example_from_template(template: JsonValue, depth: int = 0) -> JsonValue:
    """An instance of a ToolBench type template (``"str"``, ``"int"``, nested)."""
    if depth > MAX_DEPTH:
        return None
    if isinstance(template, dict):
        return {key: example_from_template(value, depth + 1) for key, value in template.items()}
    if isinstance(template, list):
        if not template:
            return []
        item = example_from_template(template[0], depth + 1)
        return [item, item, item]
    if isinstance(template, str):
        return _TEMPLATE_VALUES.get(template, template)
    return template


def responses(path: Path) -> Iterator[tuple[str, JsonValue]]:
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        for line in lines:
            document = json.loads(line)
            name = f"{document.get('tool_name', '')}/{document.get('api_name', '')}"
            if document.get("response_schema"):
                yield name, example_from_schema(document["response_schema"])
            elif "template_response" in document:
                yield name, example_from_template(document["template_response"])


@dataclass
class Totals:
    responses: int = 0
    over_limit: int = 0
    fields_fit: int = 0
    raw_chars: int = 0
    truncate_chars: int = 0
    rules_chars: int = 0
    over_raw_chars: int = 0
    over_fields_only_chars: int = 0
    ratios_truncate: list[float] = field(default_factory=list)
    ratios_rules: list[float] = field(default_factory=list)


async def measure(path: Path, limit: int) -> Totals:
    truncating = Compressor(limit)
    choosing = Compressor(limit, RuleFieldChooser())
    totals = Totals()
    for name, response in responses(path):
        tool = Tool(id=name, name="api", original_name=name, provenance=Provenance(format="bench"))
        cut = await truncating.compress(tool, response)
        chosen = await choosing.compress(tool, response)
        totals.responses += 1
        totals.raw_chars += cut.raw_chars
        totals.truncate_chars += len(cut.text)
        totals.rules_chars += len(chosen.text)
        if cut.raw_chars > limit:
            totals.over_limit += 1
            totals.ratios_truncate.append(cut.ratio)
            totals.ratios_rules.append(chosen.ratio)
            totals.fields_fit += chosen.method == "fields"
            totals.over_raw_chars += cut.raw_chars
            kept = select_fields(response, list(chosen.fields)) if chosen.fields else response
            totals.over_fields_only_chars += len(serialize(kept))
    return totals


def report(totals: Totals, limit: int) -> dict[str, object]:
    def saved(chars: int) -> float:
        return 1 - chars / totals.raw_chars

    summary: dict[str, object] = {
        "limit_chars": limit,
        "responses": totals.responses,
        "over_limit": totals.over_limit,
        "raw_chars": totals.raw_chars,
        "truncate_chars": totals.truncate_chars,
        "rules_chars": totals.rules_chars,
        "saved_truncate": round(saved(totals.truncate_chars), 4),
        "saved_rules": round(saved(totals.rules_chars), 4),
        "median_ratio_over_limit_truncate": round(statistics.median(totals.ratios_truncate), 4),
        "median_ratio_over_limit_rules": round(statistics.median(totals.ratios_rules), 4),
        "over_limit_fit_by_fields_alone": totals.fields_fit,
        "over_limit_saved_by_fields_alone": round(
            1 - totals.over_fields_only_chars / totals.over_raw_chars, 4
        ),
    }
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--limit", type=int, default=1024, help="characters (METHOD.md: 1,024)")
    args = parser.parse_args(argv)
    totals = asyncio.run(measure(args.corpus, args.limit))
    summary = report(totals, args.limit)
    over = totals.over_limit
    print(f"{totals.responses} synthetic responses, {over} over {args.limit} characters")
    print(f"{'policy':<18} {'chars read':>12} {'saved':>7} {'median ratio (over limit)':>26}")
    print(f"{'raw':<18} {totals.raw_chars:>12,} {'':>7} {'1.000':>26}")
    for policy, chars, ratios in (
        ("truncate", totals.truncate_chars, totals.ratios_truncate),
        ("rules+truncate", totals.rules_chars, totals.ratios_rules),
    ):
        print(
            f"{policy:<18} {chars:>12,} {1 - chars / totals.raw_chars:>6.1%} "
            f"{statistics.median(ratios):>26.3f}"
        )
    print(
        f"over-limit responses: field choice alone (no cut) keeps "
        f"{totals.over_fields_only_chars / totals.over_raw_chars:.1%} of their characters"
    )
    print(
        f"over-limit responses the field choice alone brought under the limit: "
        f"{totals.fields_fit} of {over} ({totals.fields_fit / max(1, over):.1%})"
    )
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "bench_compression.json").write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
