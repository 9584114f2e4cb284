"""``python -m retriever.gate --data ../shared/data/train``: fit and write the shipped gate.

Seeded: the same data gives the same ``weights.json``. The thresholds come from
leave-one-source-out predictions (each source scored by a gate fitted without it):
orchestrate mode's and select mode's opt-in one by the balanced rule (the best balanced
accuracy on tool against no tool, keeping 95 % of the requests that need a tool),
the confident one (the refusal edge when the upstream triages) keeping 99 %; the
weights are then fitted on every source.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import get_args

from retriever.gate.model import WEIGHTS, EncoderChoice
from retriever.gate.train import (
    RULES,
    SHIPPED_RULE,
    Options,
    fit,
    load_design,
    out_of_source,
    progress,
)
from retriever.gate.vectors import CACHE


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m retriever.gate", description=__doc__)
    parser.add_argument("--data", type=Path, required=True, help="the train/ folder")
    parser.add_argument("--out", type=Path, default=WEIGHTS, help="where weights.json goes")
    parser.add_argument("--cache", type=Path, default=CACHE, help="text vectors (gitignored)")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--encoder", choices=get_args(EncoderChoice), default="bundled",
                        help="bundled: MiniLM as it is (the shipped file); default: the "
                        "retriever's default encoder, adapter included")  # fmt: skip
    parser.add_argument("--scalars-only", action="store_true",
                        help="without the query's vector (measured, not shipped)")  # fmt: skip
    args = parser.parse_args(argv)
    started = time.perf_counter()
    data, encoder = load_design(args.data, args.cache, args.seed, args.encoder)
    options = Options(seed=args.seed, query_vector=not args.scalars_only)
    predicted = out_of_source(data, options, encoder, progress)
    progress("fitting on every source")
    gate = fit(data, options, encoder, sorted(set(data.sources.tolist())))
    thresholds = {name: rule(predicted, data.real()) for name, rule in RULES.items()}
    progress(f"thresholds by rule: {thresholds} (shipped: {SHIPPED_RULE})")
    chosen = {
        "threshold": thresholds[SHIPPED_RULE],
        "confident_threshold": min(thresholds["confident"], thresholds[SHIPPED_RULE]),
        "opt_in_threshold": thresholds[SHIPPED_RULE],
        "encoder_choice": args.encoder,
    }
    spec = gate.spec.model_copy(update=chosen)
    args.out.write_text(spec.model_dump_json(indent=None) + "\n", encoding="utf-8")
    took = time.perf_counter() - started
    size = args.out.stat().st_size
    print(f"wrote {args.out} ({size:,} bytes, threshold {spec.threshold}) in {took:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
