"""A file for ``toolgraph eval gate`` that the shipped gate was never fitted on.

The gate trains on seeded samples of CLINC150 (2,000 of 23,700 rows) and NQ-open (800
of 3,610) (:data:`retriever.gate.data.SAMPLE`); the rows past those samples are unseen.
This draws some of each (seeded) and writes them with CLINC's catalog, the 135 intents
outside its small-talk domain, the one their labels are relative to:

    python -m eval.gate_heldout --data ../shared/data/train --out .cache/gate_heldout
    toolgraph eval gate --data .cache/gate_heldout/data.jsonl \\
        --tools .cache/gate_heldout/tools.json

NQ-open's knowledge questions need no tool whatever the catalog; CLINC's own
chit-chat and out-of-scope rows need none of its intents.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import Any

from retriever.documents import name_words
from retriever.gate.data import SAMPLE, _source_rows
from retriever.gate.train import Options

#: The gate's own seed: the samples it trains on are drawn with it.
GATE_SEED = Options.seed


def unseen_rows(root: Path, source: str) -> list[dict[str, Any]]:
    """``source``'s rows of ``root/gate`` outside the sample the gate trains on."""
    every = _source_rows(root, source, {source: 10**9}, GATE_SEED)
    trained = {row["id"] for row in _source_rows(root, source, SAMPLE, GATE_SEED)}
    return [row for row in every if row["id"] not in trained]


def clinc_tools(root: Path) -> list[dict[str, str]]:
    """CLINC's intents outside small talk, as ``{"name", "description"}``."""
    path = root / "gate" / "clinc150_intents.json"
    intents = json.loads(path.read_text(encoding="utf-8"))["intents"]
    return [
        {"name": i["name"], "description": f"{name_words(i['name'])} ({name_words(i['domain'])})"}
        for i in intents
        if i["domain"] != "small_talk"
    ]


def build(root: Path, clinc: int, nq_open: int, seed: str) -> list[dict[str, Any]]:
    """``clinc`` unseen CLINC150 rows and ``nq_open`` unseen NQ-open rows, drawn with
    ``seed``, as ``{"query", "needs_tool"}``."""
    draw = random.Random(seed)
    picked = draw.sample(unseen_rows(root, "clinc150"), clinc)
    picked += draw.sample(unseen_rows(root, "nq_open"), nq_open)
    return [{"query": row["query"], "needs_tool": bool(row["needs_tool"])} for row in picked]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eval.gate_heldout", description=__doc__)
    parser.add_argument("--data", type=Path, required=True, help="the train/ folder")
    parser.add_argument("--out", type=Path, required=True, help="writes data.jsonl, tools.json")
    parser.add_argument("--clinc", type=int, default=800, help="unseen CLINC150 rows")
    parser.add_argument("--nq-open", type=int, default=200, help="unseen NQ-open rows")
    parser.add_argument("--seed", default="heldout")
    args = parser.parse_args(argv)
    rows = build(args.data, args.clinc, args.nq_open, args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    lines = "".join(json.dumps(row) + "\n" for row in rows)
    (args.out / "data.jsonl").write_text(lines, encoding="utf-8")
    tools = clinc_tools(args.data)
    (args.out / "tools.json").write_text(json.dumps(tools, indent=1) + "\n", encoding="utf-8")
    needs = sum(row["needs_tool"] for row in rows)
    print(f"{len(rows)} requests ({needs} need a tool), {len(tools)} tools in {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
