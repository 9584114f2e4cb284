"""The no-tool gate, leave-one-source-out: accuracy, precision, recall per held-out source.

    python -m eval.gate_report --data ../shared/data/train

For each source (the six of ``train/gate``, the eight retrieval sets, the template
requests: retriever.gate.data.SOURCES), a gate is fitted on the others (BFCL and
When2Call leave together: When2Call's questions are BFCL's; made "no tool" rows,
retriever.gate.augment, leave with their source and are never scored) and its
thresholds are chosen on them alone (nested: each training source scored by a gate
that did not see it): the shipped rule, balanced (the best balanced accuracy on tool
against no tool, lowered to keep 95 % of tool requests) as ``gate``, the confident
refusal edge used under triage (99 % kept) as ``gate_confident``, the earlier cautious
rule (98 % kept) as ``gate_cautious98``, the best mean accuracy as
``gate_accuracy_rule`` and the least mean cost with a missed tool costing twice a
needless plan as ``gate_cost2``; the held-out source is then scored once. The
baseline is the bare best cosine of the query against the catalog, its threshold
chosen by the best mean accuracy on the training sources. The
latency is that of one decision (the query's forward pass, the features and the
network) against the built-in catalog, and of the features and network alone.
Writes ``eval/results/gate.json`` and ``retriever/gate/gate_eval.png``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any, get_args

import numpy as np
import numpy.typing as npt

from eval.data_folder import dataset
from eval.gate import score
from retriever.gate.data import SOURCES, GateRow
from retriever.gate.model import EncoderChoice
from retriever.gate.train import (
    OVERLAPS,
    SHIPPED_RULE,
    Array,
    Design,
    Options,
    add_fit_arguments,
    choose_threshold,
    fit_options,
    held_out_gate,
    load_design,
    progress,
    row_thresholds,
    scores,
)

RESULTS = Path("eval/results/gate.json")
PLOT = Path("retriever/gate/gate_eval.png")
Flags = npt.NDArray[np.bool_]
COSINES = np.round(np.arange(0.0, 0.951, 0.01), 2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eval.gate_report", description=__doc__)
    parser.add_argument("--data", type=Path, required=True, help="the train/ folder")
    add_fit_arguments(parser)
    parser.add_argument("--sources", default="",
                        help="the sources to hold out, comma-separated (default: all)")  # fmt: skip
    parser.add_argument("--broad", type=Path, nargs="?", const=dataset("toolbench_stable"),
                        help="also score each 'no tool' source's gate on broad catalogs of "
                        "this unseen set (eval.gate_broad; default toolbench_stable)")  # fmt: skip
    parser.add_argument("--encoder", choices=get_args(EncoderChoice), default="bundled",
                        help="the encoder the gates read (retriever.gate.model)")  # fmt: skip
    parser.add_argument("--jobs", type=int, default=1,
                        help="held-out sources fitted at once, one process each")  # fmt: skip
    parser.add_argument("--previous", type=Path,
                        help="an earlier weights.json, scored as it is at its own threshold "
                        "(no refit: in-sample on the sources it was trained on)")  # fmt: skip
    parser.add_argument("--json", type=Path, default=RESULTS)
    parser.add_argument("--plot", type=Path, default=PLOT)
    args = parser.parse_args(argv)
    data, encoder = load_design(args.data, seed=args.seed, choice=args.encoder)
    options = fit_options(args)
    report: dict[str, Any] = {"options": options.__dict__, "sources": {}}
    real = data.real()
    sources = [s for s in SOURCES if not args.sources or s in args.sources.split(",")]
    tests = broad_designs(args.data, args.broad) if args.broad else {}
    jobs = [(data, source, options, encoder, tests.get(source)) for source in sources]
    with ProcessPoolExecutor(args.jobs, mp_context=get_context("fork")) as pool:
        held = dict(zip(sources, pool.map(_held_out, jobs), strict=True))
    for source in sources:
        probability, thresholds, at, seconds, broad = held[source]
        rows = real.subset(real.sources == source)
        report["sources"][source] = {
            "rows": len(rows),
            "needs_tool": int(rows.labels.sum()),
            "gate": {
                **_scores(rows, probability, thresholds[SHIPPED_RULE], at),
                "bank_quantile": thresholds.get("bank_quantile"),
            },
            "gate_without_cutoff": _scores(rows, probability, thresholds[SHIPPED_RULE]),
            "gate_confident": _scores(rows, probability, thresholds["confident"]),
            "gate_cautious98": _scores(rows, probability, thresholds["recall98"]),
            "gate_accuracy_rule": _scores(rows, probability, thresholds["accuracy"]),
            "gate_cost2": _scores(rows, probability, thresholds["cost"]),
            "max_cosine": _baseline(real, source),
            **({"previous": _previous(args.previous, rows)} if args.previous else {}),
            "by_category": _by_category(real, source, probability >= at),
            **({"broad": broad} if broad else {}),
            "seconds": seconds,
        }
        print(source, json.dumps(report["sources"][source]["gate"]), flush=True)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2) + "\n")  # kept if the shipped gate fails
    plot(report, args.plot)
    report["latency_ms"] = latency()  # of the shipped gate (retriever/gate/weights.json)
    args.json.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.json} and {args.plot}")
    return 0


def _held_out(
    job: tuple[Design, str, Options, str, Design | None],
) -> tuple[Array, dict[str, float], Array, float, dict[str, Any] | None]:
    """One held-out source's scores, thresholds (:func:`held_out_gate`; its cutoff's
    quantile as ``bank_quantile``) and each row's threshold at the shipped rule, seconds,
    and its gate's scores on the broad test (:mod:`eval.gate_broad`) where there is one."""
    data, source, options, encoder, test = job
    progress(f"holding out {source}")
    started = time.perf_counter()
    gate, thresholds = held_out_gate(data, source, options, encoder, progress)
    thresholds = {**thresholds, "bank_quantile": gate.spec.bank_quantile or 0.0}
    held = data.real()
    rows = held.subset(held.sources == source)
    probability = scores(gate, rows)
    at = row_thresholds(gate, rows, thresholds[SHIPPED_RULE])
    broad = None
    if test is not None:
        tested = scores(gate, test)
        cut = row_thresholds(gate, test, thresholds[SHIPPED_RULE])
        broad = {
            **_scores(test, tested, thresholds[SHIPPED_RULE], cut),
            "no_tool_right": round(float(np.mean(tested[~test.labels] < cut[~test.labels])), 4),
            "without_cutoff": _scores(test, tested, thresholds[SHIPPED_RULE]),
        }
    return probability, thresholds, at, round(time.perf_counter() - started, 1), broad


def broad_designs(root: Path, folder: Path) -> dict[str, Design]:
    """The broad test of each "no tool" source (:mod:`eval.gate_broad`) as features."""
    from eval.gate_broad import NO_TOOL, broad_catalogs, broad_rows
    from retriever.gate.data import load_rows

    rows = load_rows(root, seed=Options.seed)
    catalogs = broad_catalogs(folder)
    return designs_of(
        {s: broad_rows(catalogs, [r for r in rows if r.source == s]) for s in NO_TOOL}
    )


def designs_of(tests: Mapping[str, Sequence[GateRow]]) -> dict[str, Design]:
    """Each test's rows as features, with the bank's scalars against every catalog (the
    cutoffs'), the texts' vectors from the gate's cache."""
    from retriever.config import RetrieverConfig
    from retriever.embedder import load_encoder
    from retriever.gate.background import BANK, bank_texts
    from retriever.gate.model import gate_encoder_config
    from retriever.gate.train import design
    from retriever.gate.vectors import CACHE, cached_vectors

    encoder = load_encoder(gate_encoder_config(RetrieverConfig(device="auto")))
    texts = [text for rows in tests.values() for r in rows for text in (r.query, *r.catalog)]
    vectors = cached_vectors(encoder, texts, CACHE)
    bank = BANK.of(encoder)
    return {name: design(rows, vectors, bank, bank_texts()) for name, rows in tests.items()}


def _scores(
    rows: Design, probability: Array, threshold: float, at: Array | None = None
) -> dict[str, float | None]:
    """The scores at ``threshold``, or at each row's own (``at``: the threshold raised to
    its catalog's cutoff)."""
    gold = rows.labels.tolist()
    result: dict[str, float | None] = {
        **score(gold, (probability >= (threshold if at is None else at)).tolist()),
        "threshold": threshold,
        "auc": auc(rows.labels, probability),
    }
    if not any(gold):  # only requests that need no tool: precision and recall say nothing
        result["precision"] = result["recall"] = result["f1"] = None
    return result


def _baseline(data: Design, held_out: str) -> dict[str, float | None]:
    """The best cosine against a threshold chosen on the training sources."""
    cosine = np.where(data.has_catalog, data.scalars[:, 0], -1.0)
    training = ~np.isin(data.sources, OVERLAPS.get(held_out, (held_out,)))
    threshold = choose_threshold(cosine[training], data.subset(training), COSINES)
    rows = data.sources == held_out
    return _scores(data.subset(rows), cosine[rows], threshold)


def _previous(path: Path, rows: Design) -> dict[str, float | None]:
    """An earlier gate file's scores at its own threshold (a file from before the
    confident threshold decides at its one threshold)."""
    from retriever.gate.model import Gate, GateFile

    raw = json.loads(path.read_text(encoding="utf-8"))
    raw.setdefault("confident_threshold", raw["threshold"])
    gate = Gate(GateFile.model_validate(raw))
    probability = np.where(rows.has_catalog, gate.probability(rows.scalars, rows.queries), 0.0)
    return _scores(rows, probability, gate.threshold)


def _by_category(data: Design, source: str, predicted: Flags) -> dict[str, dict[str, float]]:
    categories = data.categories[data.sources == source]
    right = predicted == data.labels[data.sources == source]
    return {
        str(c): {
            "rows": int((categories == c).sum()),
            "accuracy": round(float(np.mean(right[categories == c])), 4),
        }
        for c in sorted(set(categories.tolist()))
    }


def auc(labels: Flags, probability: Array) -> float | None:
    """The area under the ROC curve (the rank statistic); None with one class only."""
    positive, negative = probability[labels], probability[~labels]
    if not len(positive) or not len(negative):
        return None
    order = np.argsort(np.concatenate([positive, negative]), kind="mergesort")
    ranks = np.empty(len(order))
    ranks[order] = np.arange(1, len(order) + 1)
    wins = ranks[: len(positive)].sum() - len(positive) * (len(positive) + 1) / 2
    return round(float(wins / (len(positive) * len(negative))), 4)


def latency(repeats: int = 200) -> dict[str, float]:
    """Milliseconds of one decision against the built-in catalog (median and p95)."""
    from graph_store.models import Tool
    from proxy.tools.packs.math.catalog import builtin_tools
    from retriever.config import RetrieverConfig
    from retriever.documents import tool_fields
    from retriever.embedder import load_encoder
    from retriever.gate.catalog import CatalogGate
    from retriever.gate.features import gate_document
    from retriever.gate.model import load_gate

    tools: list[Tool] = builtin_tools()
    shipped = load_gate()
    encoder = load_encoder(shipped.encoder_config(RetrieverConfig(device="cpu")))
    gate = CatalogGate(shipped, encoder, [gate_document(tool_fields(t)) for t in tools])
    queries = [f"what is the integral of x^{i} from 0 to {i}?" for i in range(repeats)]
    whole, model = [], []
    for query in queries:
        started = time.perf_counter()
        vector = encoder.encode([query])[0]
        middle = time.perf_counter()
        gate.decide_vector(vector, query)
        ended = time.perf_counter()
        whole.append((ended - started) * 1000)
        model.append((ended - middle) * 1000)
    return {
        "tools": len(tools),
        "decision_p50": round(statistics.median(whole), 3),
        "decision_p95": round(float(np.percentile(whole, 95)), 3),
        "features_and_network_p50": round(statistics.median(model), 3),
    }


def plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sources = list(report["sources"])
    bars = {
        "max cosine (best-accuracy threshold)": "max_cosine",
        "learned gate, cautious threshold (98 % of tool requests kept)": "gate_cautious98",
        "learned gate, shipped balanced threshold": "gate",
    }
    x = np.arange(len(sources))
    figure, axes = plt.subplots(figsize=(12, 4.5))
    for i, (label, key) in enumerate(bars.items()):
        heights = [report["sources"][s][key]["accuracy"] for s in sources]
        axes.bar(x + (i - 1) * 0.27, heights, 0.27, label=label)
    axes.axhline(0.85, color="grey", linestyle="--", linewidth=1, label="target 0.85")
    axes.set_xticks(x, sources, rotation=35, ha="right")
    axes.set_ylim(0, 1)
    axes.set_ylabel("accuracy on the held-out source")
    axes.set_title("No-tool gate, leave-one-source-out (train/gate, the retrieval sets, templates)")
    axes.legend(loc="lower left", fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


if __name__ == "__main__":
    raise SystemExit(main())
