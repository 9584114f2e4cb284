"""The gate's threshold and cutoff chosen on broad catalogs, against the shipped rule.

    python -m eval.gate_rules --data ../shared/data/train

A gate's probability orders requests well on broad catalogs (a few hundred tools across
many domains) but the shipped threshold is chosen on rows whose "no tool" requests
meet narrow catalogs. The rules here choose, on the training sources alone, where a
request must score, each on the rows ``retriever.gate.broad`` makes against broad
catalogs (:data:`RULES`); every rule is read off predictions made by gates that never
saw the row's source (nested leave-one-source-out, as ``eval.gate_report``), so the
fits are shared and the rules cost nothing more. Scored, for each rule and each fit
(the shipped gate's inputs and training rows; the gate that also reads the catalog's
background and trains on the broad rows):

* every left-out source (``retriever.gate.data.SOURCES``), and for the "no tool" ones
  the broad catalogs of toolbench_stable nothing was fitted on (``eval.gate_broad``);
* with the gate fitted on every source: the held-out file (``eval.gate_heldout``) and
  the unseen API catalogs of ``eval.retrieval_table --gate-unseen``;
* how often a request scores at least ``SURE_OF_A_TOOL`` (0.8, where orchestrate
  skips the planner's triage) and at least the bank's best score against its catalog.

The fits of each fold are kept in ``.bench/gate_rules/`` (a rerun reads them).
Writes ``eval/results/gate_rules.json`` and prints the tables.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from eval.data_folder import dataset
from eval.gate import score
from eval.gate_report import auc, broad_designs, designs_of
from retriever.documents import function_fields
from retriever.gate.broad import BROAD_NONE, BROAD_TOOL
from retriever.gate.cutoff import MARGINS, bars, cutoffs
from retriever.gate.data import SOURCES, GateRow
from retriever.gate.features import gate_document
from retriever.gate.model import Gate
from retriever.gate.train import (
    OVERLAPS,
    RECALL_FLOOR,
    Array,
    Design,
    Options,
    choose_balanced_threshold,
    choose_bank_cutoff,
    fit,
    judged_out_of_source,
    load_design,
    progress,
    scores,
)

RESULTS = Path("eval/results/gate_rules.json")
CACHE = Path(".bench/gate_rules")
#: The bank quantiles the rules try (1.0: the bank's best score against the catalog).
GRID = (0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.98, 0.99, 1.0)
#: orchestrate's bar for skipping the triage (proxy/orchestrate/pipeline.py).
SURE = 0.8
FITS = {
    "shipped": Options(coverage=False, broad=False, cutoff=False),
    "coverage": Options(),
}


@dataclass(frozen=True)
class Bar:
    """What a rule chose: the threshold, and the cutoff at the bank's ``GRID[column]``
    quantile (None: no cutoff) raised by ``margin`` in log-odds."""

    threshold: float
    column: int | None = None
    margin: float = 0.0

    def chosen(self) -> dict[str, Any]:
        quantile = None if self.column is None else GRID[self.column]
        return {"threshold": self.threshold, "quantile": quantile, "margin": self.margin}


@dataclass(frozen=True)
class Scored:
    """Rows a gate scored: labels, probabilities, each row's bank cutoffs (rows x GRID)."""

    labels: Flags
    probability: Array
    cuts: Array

    def at(self, bar: Bar) -> Array:
        """Each row's bar: the threshold, raised to its cutoff where the bar has one."""
        if bar.column is None:
            return np.full(len(self.labels), bar.threshold)
        return bars(bar.threshold, self.cuts[:, bar.column], bar.margin)


@dataclass(frozen=True)
class Fold:
    """What one fold's fits gave: the training rows' out-of-source scores (``inner``,
    over ``Design.judged()``), and the fold's gate on the rows it is tested on."""

    inner: Scored
    tested: dict[str, Scored]


#: What a kept fold holds of each of its :class:`Scored`.
PARTS = ("labels", "probability", "cuts")


Flags = npt.NDArray[np.bool_]
Rule = Callable[[Design, Scored], Bar]


def _broad(data: Design) -> Flags:
    result: Flags = np.isin(data.categories, (BROAD_TOOL, BROAD_NONE))
    return result


def threshold_only(judged: Design, inner: Scored) -> Bar:
    """The balanced threshold on the real rows, no cutoff (what shipped before the cutoff)."""
    real = ~judged.augmented
    return Bar(choose_balanced_threshold(inner.probability[real], judged.subset(real)))


def _cutoff(
    judged: Design,
    inner: Scored,
    rows: Flags,
    margins: tuple[float, ...] = (0.0,),
    floor: float = RECALL_FLOOR,
) -> Bar:
    """The shipped threshold, and the bank quantile (and margin, of ``margins``) that
    ``train.choose_bank_cutoff`` chooses on ``rows``, keeping ``floor`` of their tool
    requests."""
    threshold = threshold_only(judged, inner).threshold
    quantile, margin = choose_bank_cutoff(
        inner.probability[rows],
        inner.cuts[rows],
        judged.subset(rows),
        threshold,
        quantiles=GRID,
        margins=margins,
        floor=floor,
    )
    return Bar(threshold, GRID.index(quantile) if quantile else None, margin)


def cutoff_everywhere(judged: Design, inner: Scored) -> Bar:
    """The quantile chosen on the real and broad rows (the coverage option's rule)."""
    return _cutoff(judged, inner, np.ones(len(judged), dtype=bool))


def cutoff_on_broad(judged: Design, inner: Scored) -> Bar:
    """The quantile chosen on the broad rows alone (the recall floor on their tool rows)."""
    return _cutoff(judged, inner, _broad(judged))


def margin_on_broad(judged: Design, inner: Scored) -> Bar:
    """As :func:`cutoff_on_broad`, the cutoff also raised by a margin (``MARGINS``)."""
    return _cutoff(judged, inner, _broad(judged), MARGINS)


def margin_on_broad_floor90(judged: Design, inner: Scored) -> Bar:
    """As :func:`margin_on_broad`, keeping 90 % of the broad rows' tool requests."""
    return _cutoff(judged, inner, _broad(judged), MARGINS, 0.9)


def margin_on_broad_no_floor(judged: Design, inner: Scored) -> Bar:
    """As :func:`margin_on_broad`, by balanced accuracy alone (no recall floor)."""
    return _cutoff(judged, inner, _broad(judged), MARGINS, 0.0)


def margin_everywhere_no_floor(judged: Design, inner: Scored) -> Bar:
    """The quantile and margin with the best balanced accuracy over the real and the
    broad rows together, no recall floor."""
    return _cutoff(judged, inner, np.ones(len(judged), dtype=bool), MARGINS, 0.0)


def threshold_on_broad(judged: Design, inner: Scored) -> Bar:
    """One threshold, by the balanced rule on the broad rows alone; no cutoff."""
    broad = _broad(judged)
    return Bar(choose_balanced_threshold(inner.probability[broad], judged.subset(broad)))


#: The rule the shipped ``weights.json`` was chosen by (``python -m retriever.gate
#: --no-coverage --no-broad --cutoff-rows broad --cutoff-margin --cutoff-floor 0.9``).
SHIPPED = "margin_on_broad_floor90"
RULES: dict[str, Rule] = {
    "threshold_only": threshold_only,
    "cutoff_everywhere": cutoff_everywhere,
    "cutoff_on_broad": cutoff_on_broad,
    "margin_on_broad": margin_on_broad,
    "margin_on_broad_no_floor": margin_on_broad_no_floor,
    "margin_on_broad_floor90": margin_on_broad_floor90,
    "margin_everywhere_no_floor": margin_everywhere_no_floor,
    "threshold_on_broad": threshold_on_broad,
}


def fold_of(source: str) -> tuple[str, ...]:
    """The sources that leave with ``source`` (When2Call's questions are BFCL's)."""
    return OVERLAPS.get(source, (source,))


def run_fold(
    data: Design,
    left_out: tuple[str, ...],
    options: Options,
    encoder: str,
    tests: dict[str, Design],
    folder: Path,
) -> Fold:
    """Fit without ``left_out`` (nested for the inner scores) and score ``tests``; kept
    in ``folder`` by fold, options and the rows' shapes (a rerun reads it)."""
    key = repr((options, len(data), GRID, sorted((n, len(t)) for n, t in tests.items())))
    digest = hashlib.sha1(key.encode()).hexdigest()[:12]
    path = folder / f"{'+'.join(left_out) or 'all'}-{digest}.npz"
    if path.is_file():
        return _read_fold(path, tests)
    training = data.subset(~np.isin(data.sources, left_out))
    prefix = f"  {'+'.join(left_out) or 'every source'}: "
    judged, inner, cuts = judged_out_of_source(training, options, encoder, progress, prefix, GRID)
    progress(f"{prefix}the fold's gate")
    gate = fit(training, options, encoder, [])
    fold = Fold(Scored(judged.labels, inner, cuts), {n: _scored(gate, t) for n, t in tests.items()})
    _write_fold(path, fold)
    return fold


def _scored(gate: Gate, rows: Design) -> Scored:
    assert rows.bank is not None
    assert rows.catalogs is not None
    return Scored(rows.labels, scores(gate, rows), cutoffs(gate, rows.bank, rows.catalogs, GRID))


def _read_fold(path: Path, tests: Iterable[str]) -> Fold:
    with np.load(path, allow_pickle=False) as saved:
        kept = {
            name: Scored(*(saved[f"{name}.{part}"] for part in PARTS)) for name in ("inner", *tests)
        }
    inner = kept.pop("inner")
    return Fold(inner, kept)


def _write_fold(path: Path, fold: Fold) -> None:
    arrays = {
        f"{name}.{part}": getattr(scored, part)
        for name, scored in {"inner": fold.inner, **fold.tested}.items()
        for part in PARTS
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, **arrays)


def metrics(scored: Scored, bar: Bar) -> dict[str, Any]:
    """Accuracy, precision and recall of "needs a tool" (None without tool rows), AUC."""
    labels = scored.labels
    said = scored.probability >= scored.at(bar)
    result: dict[str, Any] = {
        k: round(v, 4) for k, v in score(labels.tolist(), said.tolist()).items() if k != "f1"
    }
    if not labels.any():
        result["precision"] = result["recall"] = None
    result["auc"] = auc(labels, scored.probability)
    result["rows"] = len(labels)
    return result


def sure_shares(scored: Scored) -> dict[str, Any]:
    """How many requests of each class score at least :data:`SURE`, and at least the
    larger of it and each quantile of the bank's scores against their catalog (GRID)."""
    out: dict[str, Any] = {}
    for name, rows in (("no_tool", ~scored.labels), ("tool", scored.labels)):
        if not rows.any():
            continue
        probability, cuts = scored.probability[rows], scored.cuts[rows]
        out[name] = {
            "rows": int(rows.sum()),
            "sure": round(float(np.mean(probability >= SURE)), 4),
            **{
                f"bank_{q}": round(float(np.mean(probability >= np.maximum(SURE, cuts[:, i]))), 4)
                for i, q in enumerate(GRID)
            },
        }
    return out


def training_sure(data: Design, full: Fold) -> dict[str, Any]:
    """:func:`sure_shares` of the training sources' rows against broad catalogs, each
    scored by a gate that never saw its source (what a bar may be chosen on)."""
    broad = _broad(data.judged())
    inner = full.inner
    return sure_shares(Scored(inner.labels[broad], inner.probability[broad], inner.cuts[broad]))


def heldout_rows(root: Path) -> list[GateRow]:
    """The held-out file of ``eval.gate_heldout`` (as its defaults write it) as rows."""
    from eval.gate_heldout import build, clinc_tools

    tools = clinc_tools(root)
    catalog = tuple(gate_document(function_fields(t, t["name"])) for t in tools)
    return [
        GateRow(f"heldout:{i}", "heldout", "", row["query"], row["needs_tool"], catalog)
        for i, row in enumerate(build(root, 800, 200, "heldout"))
    ]


def unseen_rows(size: int = 200) -> dict[str, list[GateRow]]:
    """The rows of ``eval.retrieval_table --gate-unseen``: each unseen set's queries
    against a catalog of its own (their gold tools, filled to ``size``) and against the
    next set's."""
    from eval.data_folder import unseen_sets
    from eval.retrieval_rerank import unseen_set

    sets = [unseen_set(folder, 2000, 200) for folder in unseen_sets()]
    catalogs = []
    for data in sets:
        gold = {d for relevant in data.relevant for d in relevant}
        others = [f for f in data.fields if f.id not in gold]
        kept = [f for f in data.fields if f.id in gold] + others[: max(0, size - len(gold))]
        catalogs.append(tuple(gate_document(f) for f in kept))
    out = {}
    for i, data in enumerate(sets):
        own, other = catalogs[i], catalogs[(i + 1) % len(sets)]
        out[f"unseen:{data.name}"] = [
            GateRow(f"{data.name}:{j}:{needs}", data.name, "", text, needs, catalog)
            for needs, catalog in ((True, own), (False, other))
            for j, text in enumerate(data.query_texts)
        ]
    return out


def test_designs(root: Path) -> dict[str, Design]:
    """The held-out file and the unseen rows, as features (their vectors cached)."""
    return designs_of({"heldout": heldout_rows(root), **unseen_rows()})


def evaluate(
    data: Design, folds: dict[tuple[str, ...], Fold], full: Fold
) -> dict[str, dict[str, Any]]:
    """Each rule's choice on each fold's training rows and its scores on what the fold
    tested."""
    report: dict[str, dict[str, Any]] = {}
    for name, rule in RULES.items():
        sources: dict[str, Any] = {}
        for left_out, fold in folds.items():
            judged = data.subset(~np.isin(data.sources, left_out)).judged()
            bar = rule(judged, fold.inner)
            for test, scored in fold.tested.items():
                sources[test] = {**metrics(scored, bar), **bar.chosen()}
        judged = data.judged()
        bar = rule(judged, full.inner)
        unseen = {t: {**metrics(s, bar), **bar.chosen()} for t, s in full.tested.items()}
        report[name] = {"left_out": sources, "every_source": unseen}
    return report


def summary(report: dict[str, Any]) -> dict[str, Any]:
    """Per rule: the left-out sources' mean accuracy, how many reach 0.85 accuracy and
    0.95 recall, the broad tests' and the unseen rows' accuracy."""
    left = {s: r for s, r in report["left_out"].items() if not s.startswith("broad:")}
    broad = {s: r for s, r in report["left_out"].items() if s.startswith("broad:")}
    recalls = [r["recall"] for r in left.values() if r["recall"] is not None]
    return {
        "mean_accuracy": round(float(np.mean([r["accuracy"] for r in left.values()])), 4),
        "accuracy_0.85": f"{sum(r['accuracy'] >= 0.85 for r in left.values())}/{len(left)}",
        "recall_0.95": f"{sum(r >= 0.95 for r in recalls)}/{len(recalls)}",
        "min_recall": min(recalls),
        "broad_accuracy": {s: r["accuracy"] for s, r in broad.items()},
        "every_source": {s: r["accuracy"] for s, r in report["every_source"].items()},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eval.gate_rules", description=__doc__)
    parser.add_argument("--data", type=Path, required=True, help="the train/ folder")
    parser.add_argument("--fits", default=",".join(FITS), help="of " + ", ".join(FITS))
    parser.add_argument("--cache", type=Path, default=CACHE, help="each fold's scores")
    parser.add_argument("--json", type=Path, default=RESULTS)
    parser.add_argument("--only", default="", help="the sources to hold out (default: all)")
    parser.add_argument("--steps", type=int, default=Options.steps, help="fewer: a quick check")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    load = {"start": round(os.getloadavg()[0], 1)}
    data, encoder = load_design(args.data)
    broad = broad_designs(args.data, dataset("toolbench_stable"))
    unseen = test_designs(args.data)
    real = data.real()
    wanted = [s for s in SOURCES if not args.only or s in args.only.split(",")]
    groups = list(dict.fromkeys(fold_of(s) for s in wanted))
    out: dict[str, Any] = {"grid": GRID, "sure": SURE, "fits": {}}
    for fit_name in args.fits.split(","):
        options = dataclasses.replace(FITS[fit_name], steps=args.steps)
        folder = args.cache / fit_name
        folds = {}
        for group in groups:
            progress(f"{fit_name}: without {'+'.join(group)}")
            tests = {s: real.subset(real.sources == s) for s in group}
            tests |= {f"broad:{s}": broad[s] for s in group if s in broad}
            folds[group] = run_fold(data, group, options, encoder, tests, folder)
        progress(f"{fit_name}: every source")
        full = run_fold(data, (), options, encoder, unseen, folder)
        report = evaluate(data, folds, full)
        sure = {
            "training_broad_rows": training_sure(data, full),
            **{t: sure_shares(s) for f in folds.values() for t, s in f.tested.items()},
            **{t: sure_shares(s) for t, s in full.tested.items()},
        }
        out["fits"][fit_name] = {
            "options": options.__dict__,
            "rules": {r: {**v, "summary": summary(v)} for r, v in report.items()},
            "sure_of_a_tool": sure,
        }
        for rule, value in out["fits"][fit_name]["rules"].items():
            print(fit_name, rule, json.dumps(value["summary"]), flush=True)
        load["end"] = round(os.getloadavg()[0], 1)
        out["load_average"] = load
        out["minutes"] = round((time.perf_counter() - started) / 60, 1)
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=2) + "\n")  # each fit's, as it ends
    print(f"wrote {args.json} ({out['minutes']} min, load {out['load_average']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
