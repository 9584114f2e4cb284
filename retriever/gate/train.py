"""Fit the gate, leaving whole sources out to choose its threshold and to measure it.

Every source weighs the same in the loss (CLINC150's thousands of requests as much
as ACEBench's 750), its made "no tool" rows (:mod:`~retriever.gate.augment`) half as
much. Thresholds are chosen by a rule (:data:`RULES`) on predictions made by models
that never saw the row's source: for a held-out source, the other sources are each
left out in turn (nested), so nothing of the held-out source chooses anything. When2Call
is built from BFCL's questions: leaving one out leaves out both.

Rows with an empty catalog are decided by rule (no tool can serve) and not fitted.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from retriever.config import RetrieverConfig
from retriever.embedder import Vectors, load_encoder
from retriever.gate.augment import augmented
from retriever.gate.background import BANK, COVERAGE, bank_texts
from retriever.gate.broad import BROAD_NONE, BROAD_TOOL, broad_rows
from retriever.gate.cutoff import MARGINS, QUANTILES, BankRows, bars, cutoffs
from retriever.gate.data import SOURCES, GateRow, load_rows
from retriever.gate.features import SCALARS, CatalogView, scalar_features
from retriever.gate.model import EncoderChoice, Gate, GateFile, Layer, gate_encoder_config
from retriever.gate.retrieval_rows import retrieval_gold
from retriever.gate.vectors import CACHE, cached_vectors

Array = npt.NDArray[np.float64]

#: Sources that share questions: leaving one out leaves out all of its group.
OVERLAPS = {"bfcl": ("bfcl", "when2call"), "when2call": ("bfcl", "when2call")}


@dataclass(frozen=True)
class Design:
    """The rows as arrays: features, query vectors, labels, sources."""

    scalars: Array
    queries: Array
    labels: npt.NDArray[np.bool_]
    sources: npt.NDArray[np.str_]
    has_catalog: npt.NDArray[np.bool_]
    categories: npt.NDArray[np.str_]
    augmented: npt.NDArray[np.bool_]  # made by retriever.gate.augment: trained on, never scored
    #: Each row's catalog, an index into ``bank`` (-1: none); None: no bank.
    catalogs: npt.NDArray[np.int_] | None = None
    bank: BankRows | None = None  # the bank's scalars against every catalog (shared)

    def __len__(self) -> int:
        return len(self.labels)

    def subset(self, mask: npt.NDArray[np.bool_]) -> Design:
        return Design(
            self.scalars[mask],
            self.queries[mask],
            self.labels[mask],
            self.sources[mask],
            self.has_catalog[mask],
            self.categories[mask],
            self.augmented[mask],
            None if self.catalogs is None else self.catalogs[mask],
            self.bank,
        )

    def real(self) -> Design:
        """The rows as the source gave them (what is scored)."""
        return self.subset(~self.augmented)

    def judged(self) -> Design:
        """The real rows and those against broad catalogs: what chooses the cutoff's
        quantile (:func:`choose_bank_cutoff`), the broad catalogs being where it acts."""
        return self.subset(~self.augmented | np.isin(self.categories, (BROAD_TOOL, BROAD_NONE)))


#: Share of the requests needing a tool that the balanced threshold must still keep.
RECALL_FLOOR = 0.95


@dataclass(frozen=True)
class Options:
    hidden: int = 0  # logistic regression: a 32-unit layer did no better out of source
    #: Read the query's own vector too (384 inputs); off: the seven scalars alone
    #: (``python -m eval.gate_report --scalars-only``, measured beside the shipped gate).
    query_vector: bool = True
    steps: int = 300
    learning_rate: float = 0.01
    l2: float = 1e-4
    seed: int = 13
    #: Weight of a source's augmented "no tool" rows (retriever.gate.augment) in the loss,
    #: as a share of the source's own rows' (which sum to one); 0: not trained on.
    augmented_weight: float = 0.5
    #: Read the catalog's background too (:data:`~retriever.gate.background.COVERAGE`).
    coverage: bool = True
    #: Train on the rows against broad catalogs (:mod:`~retriever.gate.broad`), their
    #: weight a share of their source's own rows'.
    broad: bool = True
    broad_weight: float = 0.5
    #: Choose the catalog's cutoff (:mod:`~retriever.gate.cutoff`) beside the thresholds.
    cutoff: bool = True
    #: The rows its quantile is chosen on (:func:`choose_cutoff`): ``judged``,
    #: the real rows and those against broad catalogs (the coverage gate's); ``broad``,
    #: those against broad catalogs alone, where it acts (measured by eval.gate_rules).
    cutoff_rows: Literal["broad", "judged"] = "judged"
    #: Also choose a margin (:data:`~retriever.gate.cutoff.MARGINS`) over the bank's
    #: quantile score; off: the cutoff is the quantile's score itself.
    cutoff_margin: bool = False
    #: The share of the chosen-on rows' tool requests a cutoff must keep.
    cutoff_floor: float = RECALL_FLOOR

    @property
    def scalars(self) -> list[str]:
        """The scalars a gate fitted with these options reads."""
        return [*SCALARS, *(COVERAGE if self.coverage else ())]


def add_fit_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags that shape a fit (:class:`Options`), read back by :func:`fit_options`:
    ``python -m retriever.gate`` and ``python -m eval.gate_report`` take the same ones."""
    parser.add_argument("--seed", type=int, default=Options.seed)
    parser.add_argument("--hidden", type=int, default=Options.hidden, help="0: logistic")
    parser.add_argument("--steps", type=int, default=Options.steps)
    parser.add_argument("--augmented-weight", type=float, default=Options.augmented_weight,
                        help="weight of the made 'no tool' rows (0: none)")  # fmt: skip
    parser.add_argument("--scalars-only", action="store_true",
                        help="without the query's vector (measured, not shipped)")  # fmt: skip
    parser.add_argument("--no-coverage", action="store_true",
                        help="without the catalog's background (gate/background.py)")  # fmt: skip
    parser.add_argument("--no-broad", action="store_true",
                        help="without the rows against broad catalogs (gate/broad.py)")  # fmt: skip
    parser.add_argument("--no-cutoff", action="store_true",
                        help="without the catalog's cutoff (gate/cutoff.py)")  # fmt: skip
    parser.add_argument("--cutoff-rows", choices=("broad", "judged"), default="judged",
                        help="the rows the cutoff's quantile is chosen on: those against "
                        "broad catalogs, or those and the real rows")  # fmt: skip
    parser.add_argument("--cutoff-margin", action="store_true",
                        help="also choose a margin over the bank's quantile score")  # fmt: skip
    parser.add_argument("--cutoff-floor", type=float, default=Options.cutoff_floor,
                        help="the share of tool requests a cutoff must keep")  # fmt: skip


def fit_options(args: argparse.Namespace) -> Options:
    """The :class:`Options` of the flags :func:`add_fit_arguments` added."""
    return Options(
        hidden=args.hidden,
        steps=args.steps,
        seed=args.seed,
        query_vector=not args.scalars_only,
        augmented_weight=args.augmented_weight,
        coverage=not args.no_coverage,
        broad=not args.no_broad,
        cutoff=not args.no_cutoff,
        cutoff_rows=args.cutoff_rows,
        cutoff_margin=args.cutoff_margin,
        cutoff_floor=args.cutoff_floor,
    )


def design(
    rows: Sequence[GateRow],
    vectors: dict[str, Vectors],
    bank: Vectors | None = None,
    bank_texts: Sequence[str] = (),
) -> Design:
    """Features of every row; ``vectors`` holds each query's and tool document's vector.
    With ``bank`` (the background bank's vectors) the coverage scalars follow the others;
    with its ``bank_texts`` too, the bank's scalars against every catalog (the cutoffs')."""
    views: dict[tuple[str, ...], CatalogView] = {}
    ids: dict[tuple[str, ...], int] = {}
    coverage = bank is not None
    scalars = np.zeros((len(rows), len(SCALARS) + (len(COVERAGE) if coverage else 0)))
    catalogs = np.full(len(rows), -1)
    for i, row in enumerate(rows):
        if not row.catalog:
            continue
        if row.catalog not in views:
            matrix = np.stack([vectors[text] for text in row.catalog])
            ids[row.catalog] = len(views)
            views[row.catalog] = CatalogView.of(matrix, row.catalog, bank)
        catalogs[i] = ids[row.catalog]
        scalars[i] = scalar_features(
            vectors[row.query], row.query, views[row.catalog], coverage=coverage
        )
    rows_of_bank = None
    if bank is not None and bank_texts:
        rows_of_bank = BankRows.of(list(views.values()), bank, bank_texts)
    return Design(
        scalars,
        np.stack([vectors[row.query] for row in rows]).astype(np.float64),
        np.array([row.needs_tool for row in rows]),
        np.array([row.source for row in rows]),
        np.array([bool(row.catalog) for row in rows]),
        np.array([row.category for row in rows]),
        np.array([row.augmented for row in rows], dtype=bool),
        catalogs,
        rows_of_bank,
    )


def fit(data: Design, options: Options, encoder: str, trained_on: Sequence[str]) -> Gate:
    """A gate fitted on the rows with a catalog (threshold 0.5 until one is chosen)."""
    keep = data.has_catalog & (~data.augmented | (options.augmented_weight > 0))
    if not options.broad:
        keep &= ~np.isin(data.categories, (BROAD_TOOL, BROAD_NONE))
    data = data.subset(keep)
    read = data.scalars[:, : len(options.scalars)]
    if read.shape[1] < len(options.scalars):
        raise ValueError("the design holds no coverage scalars (load_design computes them)")
    mean = read.mean(axis=0)
    scale = read.std(axis=0) + 1e-6
    inputs = (read - mean) / scale
    if options.query_vector:
        inputs = np.hstack([inputs, data.queries])
    weights = _source_weights(data, options.augmented_weight, options.broad_weight)
    layers = _train(inputs, data.labels.astype(np.float64), weights, options)
    if not options.query_vector:  # the query's inputs get no weight at all
        first, bias = layers[0]
        unread = np.zeros((data.queries.shape[1], first.shape[1]))
        layers[0] = (np.vstack([first, unread]), bias)
    spec = GateFile(
        encoder=encoder,
        scalars=options.scalars,
        mean=mean.tolist(),
        scale=scale.tolist(),
        layers=[Layer(weight=_rounded(w), bias=_rounded(b)) for w, b in layers],
        threshold=0.5,
        confident_threshold=0.5,
        opt_in_threshold=0.5,
        trained_on=sorted(trained_on),
        seed=options.seed,
    )
    return Gate(spec)


def scores(gate: Gate, data: Design) -> Array:
    """The probability of "needs a tool" for every row; 0 where the catalog is empty."""
    probability = gate.probability(data.scalars, data.queries)
    result: Array = np.where(data.has_catalog, probability, 0.0)
    return result


def choose_threshold(probability: Array, data: Design, candidates: Array | None = None) -> float:
    """The threshold with the best mean accuracy over the sources in ``data``."""
    if candidates is None:
        candidates = np.round(np.arange(0.05, 0.951, 0.01), 2)
    sources = sorted(set(data.sources.tolist()))

    def mean_accuracy(threshold: float) -> float:
        predicted = probability >= threshold
        return float(
            np.mean(
                [np.mean(predicted[data.sources == s] == data.labels[data.sources == s])
                 for s in sources]
            )
        )  # fmt: skip

    return float(max(candidates, key=mean_accuracy))


#: What a request that needs a tool but is sent to none costs, against a needless plan's 1:
#: a missed tool is a wrong answer, a needless plan only time and tokens.
MISS_COST = 2.0


def choose_cost_threshold(
    probability: Array, data: Design, miss_cost: float = MISS_COST, candidates: Array | None = None
) -> float:
    """The threshold with the least mean cost over the sources in
    ``data``, a missed tool costing ``miss_cost`` and a needless plan 1 (each source's
    cost a share of its rows, so every source weighs the same)."""
    if candidates is None:
        candidates = np.round(np.arange(0.05, 0.951, 0.01), 2)
    sources = sorted(set(data.sources.tolist()))

    def mean_cost(threshold: float) -> float:
        predicted = probability >= threshold
        missed = data.labels & ~predicted
        needless = ~data.labels & predicted
        cost = miss_cost * missed + needless
        return float(np.mean([np.mean(cost[data.sources == s]) for s in sources]))

    return float(min(candidates, key=mean_cost))


#: Share of the requests needing a tool that the cautious threshold keeps on the tool side.
RECALL_TARGET = 0.98


def choose_recall_threshold(
    probability: Array, data: Design, target: float = RECALL_TARGET
) -> float:
    """The cautious rule (shipped before the balanced one): the highest threshold that
    sends ``target`` of the requests needing a tool (with a catalog, pooled over the
    sources in ``data``) to the tools."""
    needs = probability[data.labels & data.has_catalog]
    for threshold in np.round(np.arange(0.95, 0.0099, -0.01), 2):
        if needs.size == 0 or float(np.mean(needs >= threshold)) >= target:
            return float(threshold)
    return 0.0


def held_out_gate(
    data: Design,
    held_out: str,
    options: Options,
    encoder: str,
    say: Callable[[str], None],
) -> tuple[Gate, dict[str, float]]:
    """A gate that never saw ``held_out`` (nor the sources sharing its questions), and
    the thresholds of each rule (:data:`RULES`) chosen (nested, leaving each other source
    out in turn, scoring its real rows) without it; with ``options.cutoff`` its
    ``bank_quantile`` and ``bank_margin`` chosen the same way (:func:`choose_cutoff`)."""
    train_sources = [s for s in _present(data) if s not in OVERLAPS.get(held_out, (held_out,))]
    training = data.subset(np.isin(data.sources, train_sources))
    judged, inner, cuts = judged_out_of_source(training, options, encoder, say, f"  {held_out}: ")
    real = ~judged.augmented
    thresholds = {name: rule(inner[real], judged.subset(real)) for name, rule in RULES.items()}
    gate = fit(training, options, encoder, train_sources)
    if options.cutoff and training.bank is not None:
        quantile, margin = choose_cutoff(inner, cuts, judged, thresholds[SHIPPED_RULE], options)
        update = {"bank_quantile": quantile or None, "bank_margin": margin}
        gate = Gate(gate.spec.model_copy(update=update))
    return gate, thresholds


def row_thresholds(gate: Gate, data: Design, threshold: float) -> Array:
    """Each row's threshold: ``threshold``, or its catalog's cutoff where that is higher
    (a gate with a ``bank_quantile``, a design with a bank)."""
    quantile = gate.spec.bank_quantile
    if not quantile or data.bank is None or data.catalogs is None:
        return np.full(len(data), threshold)
    levels = cutoffs(gate, data.bank, data.catalogs)[:, QUANTILES.index(quantile)]
    return bars(threshold, levels, gate.spec.bank_margin)


def held_out_scores(
    data: Design,
    held_out: str,
    options: Options,
    encoder: str,
    say: Callable[[str], None],
) -> tuple[Array, dict[str, float]]:
    """Scores of ``held_out``'s real rows (``data.real()``'s, in order) by the gate of
    :func:`held_out_gate`, and its thresholds."""
    gate, thresholds = held_out_gate(data, held_out, options, encoder, say)
    held = data.real()
    return scores(gate, held.subset(held.sources == held_out)), thresholds


#: Share the confident threshold keeps: below it the gate refuses even with triage on.
CONFIDENT_RECALL = 0.99


def balanced_accuracy(probability: Array, data: Design, threshold: float | Array) -> float:
    """The mean of the two classes' accuracies, each the mean over the sources holding
    that class (every source weighs the same within its class); ``threshold``: one, or
    one a row."""
    predicted = probability >= threshold
    sources = sorted(set(data.sources.tolist()))
    per_class = []
    for label in (True, False):
        shares = [
            float(np.mean(predicted[rows] == label))
            for s in sources
            if (rows := (data.sources == s) & (data.labels == label)).any()
        ]
        if shares:
            per_class.append(float(np.mean(shares)))
    return float(np.mean(per_class)) if per_class else 0.0


def choose_balanced_threshold(
    probability: Array, data: Design, floor: float = RECALL_FLOOR
) -> float:
    """The shipped rule: the threshold with the best balanced accuracy (tool against no
    tool, :func:`balanced_accuracy`), lowered where needed until ``floor`` of the
    requests needing a tool (pooled) stay on the tool side."""
    candidates = np.round(np.arange(0.01, 0.991, 0.01), 2)
    best = float(max(candidates, key=lambda t: balanced_accuracy(probability, data, t)))
    return min(best, choose_recall_threshold(probability, data, floor))


def choose_confident_threshold(probability: Array, data: Design) -> float:
    """The lower edge of the uncertain band: below it the gate refuses even where the
    upstream triages (``plan.triage``), keeping :data:`CONFIDENT_RECALL` of tool requests."""
    return choose_recall_threshold(probability, data, CONFIDENT_RECALL)


#: The threshold rules, by name: ``balanced`` ships (:func:`choose_balanced_threshold`);
#: ``confident`` (:func:`choose_confident_threshold`) is the refusal edge with triage on;
#: ``recall98`` (:func:`choose_recall_threshold`, the earlier shipped rule), ``accuracy``
#: (:func:`choose_threshold`) and ``cost`` (:func:`choose_cost_threshold`) are measured.
RULES: dict[str, Callable[[Array, Design], float]] = {
    "balanced": choose_balanced_threshold,
    "confident": choose_confident_threshold,
    "recall98": choose_recall_threshold,
    "accuracy": choose_threshold,
    "cost": choose_cost_threshold,
}
SHIPPED_RULE = "balanced"


def out_of_source(
    data: Design, options: Options, encoder: str, say: Callable[[str], None], prefix: str = ""
) -> Array:
    """Each real row of ``data`` scored by a gate fitted without its source (and the
    sources that share its questions), in the order of ``data.real()``."""
    judged, probability, _ = judged_out_of_source(data, options, encoder, say, prefix)
    real: Array = probability[~judged.augmented]
    return real


def judged_out_of_source(
    data: Design,
    options: Options,
    encoder: str,
    say: Callable[[str], None],
    prefix: str = "",
    quantiles: Sequence[float] = QUANTILES,
) -> tuple[Design, Array, Array]:
    """``data.judged()``, each of its rows scored by a gate fitted without its source,
    and (where ``data`` has a bank) the cutoffs of that gate at every quantile of
    ``quantiles`` (rows x quantiles; zeros without a bank)."""
    judged = data.judged()
    probability = np.zeros(len(judged))
    cuts = np.zeros((len(judged), len(quantiles)))
    for source in _present(judged):
        say(f"{prefix}fold without {source}")
        keep = ~np.isin(data.sources, OVERLAPS.get(source, (source,)))
        rows = judged.sources == source
        gate = fit(data.subset(keep), options, encoder, [])
        probability[rows] = scores(gate, judged.subset(rows))
        if judged.bank is not None and judged.catalogs is not None:
            cuts[rows] = cutoffs(gate, judged.bank, judged.catalogs[rows], quantiles)
    return judged, probability, cuts


def choose_bank_cutoff(
    probability: Array,
    cuts: Array,
    data: Design,
    threshold: float,
    *,
    quantiles: Sequence[float] = QUANTILES,
    margins: Sequence[float] = (0.0,),
    floor: float = RECALL_FLOOR,
) -> tuple[float, float]:
    """The cutoff's quantile and margin, by the balanced rule: of the cutoffs that keep
    ``floor`` of ``data``'s requests needing a tool (pooled), the one with the best
    balanced accuracy over ``data`` when a request must reach both ``threshold`` and its
    catalog's cutoff (``cuts``: a column for each of ``quantiles``, 0 among them meaning
    none; raised by a margin of ``margins``); ties go to the lower cutoff. (0, 0): none."""
    needs = data.labels & data.has_catalog
    choices = [(0.0, 0.0)] + [(q, m) for m in margins for q in quantiles if q]

    def bar(choice: tuple[float, float]) -> Array:
        quantile, margin = choice
        if not quantile:
            return np.full(len(probability), threshold)
        return bars(threshold, cuts[:, quantiles.index(quantile)], margin)

    def kept(at: Array) -> bool:
        return not needs.any() or float(np.mean(probability[needs] >= at[needs])) >= floor

    at = {choice: bar(choice) for choice in choices}
    allowed = [c for c in choices if not c[0] or kept(at[c])]
    return max(
        allowed, key=lambda c: (balanced_accuracy(probability, data, at[c]), -float(np.mean(at[c])))
    )


def choose_cutoff(
    probability: Array, cuts: Array, data: Design, threshold: float, options: Options
) -> tuple[float, float]:
    """:func:`choose_bank_cutoff` on the rows ``options.cutoff_rows`` names (with
    ``broad``, only those against broad catalogs, whose tool requests the floor then
    keeps: a narrow catalog's bank scores low, the cutoff rarely binds there), with the
    margins and floor ``options`` asks for."""
    rows = np.ones(len(data), dtype=bool)
    if options.cutoff_rows == "broad":
        rows = np.isin(data.categories, (BROAD_TOOL, BROAD_NONE))
    return choose_bank_cutoff(
        probability[rows],
        cuts[rows],
        data.subset(rows),
        threshold,
        margins=MARGINS if options.cutoff_margin else (0.0,),
        floor=options.cutoff_floor,
    )


def _present(data: Design) -> list[str]:
    return [s for s in SOURCES if s in set(data.sources.tolist())]


def _source_weights(data: Design, augmented_weight: float, broad_weight: float) -> Array:
    """Each source's real rows sum to one, its augmented rows to ``augmented_weight`` and
    its rows against broad catalogs to ``broad_weight``; the sum over all rows is the
    number of rows."""
    broad = np.isin(data.categories, (BROAD_TOOL, BROAD_NONE))
    kinds = (
        (~data.augmented, 1.0),
        (data.augmented & ~broad, augmented_weight),
        (broad, broad_weight),
    )
    weights = np.zeros(len(data))
    for source in set(data.sources.tolist()):
        for kind, share in kinds:
            rows = (data.sources == source) & kind
            if rows.any():
                weights[rows] = share / rows.sum()
    result: Array = weights * len(data) / weights.sum()
    return result


def _train(
    inputs: Array, labels: Array, weights: Array, options: Options
) -> list[tuple[Array, Array]]:
    """Full-batch Adam on the weighted cross-entropy, L2 on the weights."""
    rng = np.random.default_rng(options.seed)
    sizes = [inputs.shape[1], *([options.hidden] if options.hidden else []), 1]
    params: list[Array] = []
    for fan_in, fan_out in itertools.pairwise(sizes):
        params += [rng.normal(0, np.sqrt(2 / fan_in), (fan_in, fan_out)), np.zeros(fan_out)]
    moments = [(np.zeros_like(p), np.zeros_like(p)) for p in params]
    for step in range(1, options.steps + 1):
        grads = _gradients(params, inputs, labels, weights, options.l2)
        for i, (param, grad) in enumerate(zip(params, grads, strict=True)):
            first, second = moments[i]
            first[:] = 0.9 * first + 0.1 * grad
            second[:] = 0.999 * second + 0.001 * grad**2
            update = first / (1 - 0.9**step) / (np.sqrt(second / (1 - 0.999**step)) + 1e-8)
            param -= options.learning_rate * update
    return [(params[i], params[i + 1]) for i in range(0, len(params), 2)]


def _gradients(
    params: list[Array], inputs: Array, labels: Array, weights: Array, l2: float
) -> list[Array]:
    activations = [inputs]
    for i in range(0, len(params) - 2, 2):
        activations.append(np.maximum(activations[-1] @ params[i] + params[i + 1], 0.0))
    logits = (activations[-1] @ params[-2] + params[-1])[:, 0]
    error = ((1 / (1 + np.exp(-logits)) - labels) * weights / len(labels))[:, None]
    grads: list[Array] = []
    for i in range(len(params) - 2, -1, -2):
        grads[:0] = [activations[i // 2].T @ error + l2 * params[i], error.sum(axis=0)]
        if i:
            error = (error @ params[i].T) * (activations[i // 2] > 0)
    return grads


def load_design(
    root: Path, cache: Path = CACHE, seed: int = 13, choice: EncoderChoice = "bundled"
) -> tuple[Design, str]:
    """The rows of ``root/gate`` as features read by the ``choice`` encoder
    (:func:`~retriever.gate.model.gate_encoder_config`), embedding what ``cache`` lacks."""
    progress(f"reading {root / 'gate'}")
    rows = load_rows(root, seed=seed)
    rows += augmented(rows, seed) + broad_rows(rows, retrieval_gold(root, seed), seed)
    encoder = load_encoder(gate_encoder_config(RetrieverConfig(device="auto"), choice))
    texts = [row.query for row in rows] + [text for row in rows for text in row.catalog]
    if choice != "bundled":  # one cache per encoder: switching back does not re-embed
        cache = cache.with_name(f"{cache.stem}-{choice}{cache.suffix}")
    vectors = cached_vectors(encoder, texts, cache)
    return design(rows, vectors, BANK.of(encoder), bank_texts()), encoder.name


def progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _rounded(values: Array) -> Any:
    """Six decimals: the file stays small and diffs stay readable."""
    return np.round(values, 6).tolist()
