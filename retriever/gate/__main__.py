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
    add_fit_arguments,
    choose_cutoff,
    fit,
    fit_options,
    judged_out_of_source,
    load_design,
    progress,
)
from retriever.gate.vectors import CACHE


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m retriever.gate", description=__doc__)
    parser.add_argument("--data", type=Path, help="the train/ folder")
    parser.add_argument("--out", type=Path, default=WEIGHTS, help="where weights.json goes")
    parser.add_argument("--cache", type=Path, default=CACHE, help="text vectors (gitignored)")
    parser.add_argument("--encoder", choices=get_args(EncoderChoice), default="bundled",
                        help="bundled: MiniLM as it is (the shipped file); default: the "
                        "retriever's default encoder, adapter included")  # fmt: skip
    add_fit_arguments(parser)
    parser.add_argument("--bank", action="store_true",
                        help="only embed bank.txt into bank.npz (the background bank)")  # fmt: skip
    args = parser.parse_args(argv)
    if args.bank:
        return write_bank_file()
    if args.data is None:
        parser.error("--data is required")
    started = time.perf_counter()
    data, encoder = load_design(args.data, args.cache, args.seed, args.encoder)
    options = fit_options(args)
    judged, predicted, cuts = judged_out_of_source(data, options, encoder, progress)
    progress("fitting on every source")
    gate = fit(data, options, encoder, sorted(set(data.sources.tolist())))
    real = ~judged.augmented
    thresholds = {name: rule(predicted[real], judged.subset(real)) for name, rule in RULES.items()}
    quantile, margin = 0.0, 0.0
    if options.cutoff:
        quantile, margin = choose_cutoff(predicted, cuts, judged, thresholds[SHIPPED_RULE], options)
    progress(
        f"thresholds by rule: {thresholds} (shipped: {SHIPPED_RULE}), "
        f"cutoff at the bank's {quantile} quantile + {margin}"
    )
    chosen = {
        "threshold": thresholds[SHIPPED_RULE],
        "confident_threshold": min(thresholds["confident"], thresholds[SHIPPED_RULE]),
        "opt_in_threshold": thresholds[SHIPPED_RULE],
        "bank_quantile": quantile or None,
        "bank_margin": margin,
        "encoder_choice": args.encoder,
    }
    spec = gate.spec.model_copy(update=chosen)
    args.out.write_text(spec.model_dump_json(indent=None) + "\n", encoding="utf-8")
    took = time.perf_counter() - started
    size = args.out.stat().st_size
    print(f"wrote {args.out} ({size:,} bytes, threshold {spec.threshold}) in {took:.0f} s")
    return 0


def write_bank_file() -> int:
    from retriever.config import RetrieverConfig
    from retriever.embedder import load_encoder
    from retriever.gate.background import BANK_VECTORS, write_bank
    from retriever.gate.model import gate_encoder_config

    write_bank(load_encoder(gate_encoder_config(RetrieverConfig(device="cpu"))))
    print(f"wrote {BANK_VECTORS} ({BANK_VECTORS.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
