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

import itertools
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from retriever.config import RetrieverConfig
from retriever.embedder import Vectors, load_encoder
from retriever.gate.augment import augmented
from retriever.gate.data import SOURCES, GateRow, load_rows
from retriever.gate.features import SCALARS, CatalogView, scalar_features
from retriever.gate.model import EncoderChoice, Gate, GateFile, Layer, gate_encoder_config
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
        )

    def real(self) -> Design:
        """The rows as the source gave them (what is scored)."""
        return self.subset(~self.augmented)


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


def design(rows: Sequence[GateRow], vectors: dict[str, Vectors]) -> Design:
    """Features of every row; ``vectors`` holds each query's and tool document's vector."""
    views: dict[tuple[str, ...], CatalogView] = {}
    scalars = np.zeros((len(rows), len(SCALARS)))
    for i, row in enumerate(rows):
        if not row.catalog:
            continue
        if row.catalog not in views:
            matrix = np.stack([vectors[text] for text in row.catalog])
            views[row.catalog] = CatalogView.of(matrix, row.catalog)
        scalars[i] = scalar_features(vectors[row.query], row.query, views[row.catalog])
    return Design(
        scalars,
        np.stack([vectors[row.query] for row in rows]).astype(np.float64),
        np.array([row.needs_tool for row in rows]),
        np.array([row.source for row in rows]),
        np.array([bool(row.catalog) for row in rows]),
        np.array([row.category for row in rows]),
        np.array([row.augmented for row in rows], dtype=bool),
    )


def fit(data: Design, options: Options, encoder: str, trained_on: Sequence[str]) -> Gate:
    """A gate fitted on the rows with a catalog (threshold 0.5 until one is chosen)."""
    data = data.subset(data.has_catalog & (~data.augmented | (options.augmented_weight > 0)))
    mean = data.scalars.mean(axis=0)
    scale = data.scalars.std(axis=0) + 1e-6
    inputs = (data.scalars - mean) / scale
    if options.query_vector:
        inputs = np.hstack([inputs, data.queries])
    weights = _source_weights(data, options.augmented_weight)
    layers = _train(inputs, data.labels.astype(np.float64), weights, options)
    if not options.query_vector:  # the query's inputs get no weight at all
        first, bias = layers[0]
        unread = np.zeros((data.queries.shape[1], first.shape[1]))
        layers[0] = (np.vstack([first, unread]), bias)
    spec = GateFile(
        encoder=encoder,
        scalars=list(SCALARS),
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


def held_out_scores(
    data: Design,
    held_out: str,
    options: Options,
    encoder: str,
    say: Callable[[str], None],
) -> tuple[Array, dict[str, float]]:
    """Scores of ``held_out``'s real rows (``data.real()``'s, in order) by a gate that
    never saw it, and the thresholds of each rule (:data:`RULES`) chosen (nested,
    leaving each other source out in turn, scoring its real rows) without it."""
    train_sources = [s for s in _present(data) if s not in OVERLAPS.get(held_out, (held_out,))]
    training = data.subset(np.isin(data.sources, train_sources))
    inner = out_of_source(training, options, encoder, say, f"  {held_out}: ")
    real = training.real()
    gate = fit(training, options, encoder, train_sources)
    held = data.real()
    thresholds = {name: rule(inner, real) for name, rule in RULES.items()}
    return scores(gate, held.subset(held.sources == held_out)), thresholds


#: Share of the requests needing a tool that the balanced threshold must still keep.
RECALL_FLOOR = 0.95
#: Share the confident threshold keeps: below it the gate refuses even with triage on.
CONFIDENT_RECALL = 0.99


def balanced_accuracy(probability: Array, data: Design, threshold: float) -> float:
    """The mean of the two classes' accuracies, each the mean over the sources holding
    that class (every source weighs the same within its class)."""
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
    real = data.real()
    result = np.zeros(len(real))
    for source in _present(real):
        say(f"{prefix}fold without {source}")
        keep = ~np.isin(data.sources, OVERLAPS.get(source, (source,)))
        rows = real.sources == source
        result[rows] = scores(fit(data.subset(keep), options, encoder, []), real.subset(rows))
    return result


def _present(data: Design) -> list[str]:
    return [s for s in SOURCES if s in set(data.sources.tolist())]


def _source_weights(data: Design, augmented_weight: float) -> Array:
    """Each source's real rows sum to one, its augmented rows to ``augmented_weight``;
    the sum over all rows is the number of rows."""
    weights = np.zeros(len(data))
    for source in set(data.sources.tolist()):
        for made, share in ((False, 1.0), (True, augmented_weight)):
            rows = (data.sources == source) & (data.augmented == made)
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
    rows += augmented(rows, seed)
    encoder = load_encoder(gate_encoder_config(RetrieverConfig(device="auto"), choice))
    texts = [row.query for row in rows] + [text for row in rows for text in row.catalog]
    if choice != "bundled":  # one cache per encoder: switching back does not re-embed
        cache = cache.with_name(f"{cache.stem}-{choice}{cache.suffix}")
    vectors = cached_vectors(encoder, texts, cache)
    return design(rows, vectors), encoder.name


def progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _rounded(values: Array) -> Any:
    """Six decimals: the file stays small and diffs stay readable."""
    return np.round(values, 6).tolist()
