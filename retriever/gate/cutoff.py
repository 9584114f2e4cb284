"""The catalog's cutoff: a request must also outscore most of the bank's requests.

The gate's probability orders requests well on any catalog, but one threshold does not
part them on every catalog: in a broad one (a few hundred tools across many domains)
a request that needs no tool finds close tools and scores far higher than in a narrow
one. So when a catalog's gate is assembled, the bank's requests that need no tool
(:mod:`~retriever.gate.background`) are scored by the gate against the catalog, and a
request needs a tool only if it also scores at least the bank's ``bank_quantile``
quantile there, raised by ``bank_margin`` in log-odds (``weights.json``; both chosen
out of source like the thresholds, ``train.choose_bank_cutoff``). On a narrow catalog
the bank scores near zero and the threshold decides alone; on a broad one the cutoff
rises with the bank's scores.

The cutoff applies where the gate decides at its own (balanced or opt-in) threshold;
at the confident threshold, under the planner's triage, it does not: the band the
triage sorts widens instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from retriever.embedder import Vectors
from retriever.gate.features import CatalogView, batch_scalar_features

if TYPE_CHECKING:
    from retriever.gate.model import Gate

Array = npt.NDArray[np.float64]

#: The quantiles ``train.choose_bank_cutoff`` tries (0: no cutoff).
QUANTILES = (0.0, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95, 0.98)
#: The margins (log-odds over the bank's quantile) ``train.choose_bank_cutoff`` tries.
MARGINS = (0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0)
#: Catalogs scored per product while cutoffs are computed for many (bounds the memory).
CHUNK = 64


@dataclass(frozen=True)
class BankRows:
    """The bank's scalars against each of a design's catalogs (catalog x bank x scalar),
    and the bank's query vectors."""

    scalars: Array
    queries: Array

    @classmethod
    def of(cls, views: Sequence[CatalogView], vectors: Vectors, texts: Sequence[str]) -> BankRows:
        """``views`` carry their background (the coverage scalars are computed too)."""
        scalars = np.stack([bank_scalars(view, vectors, texts) for view in views])
        return cls(scalars, vectors.astype(np.float64))


def bank_scalars(view: CatalogView, vectors: Vectors, texts: Sequence[str]) -> Array:
    """Each bank request's scalars against ``view`` (the coverage ones where it carries
    its background)."""
    return batch_scalar_features(vectors, texts, view, coverage=view.background is not None)


def bank_scores(gate: Gate, scalars: Array, queries: Array) -> Array:
    """The gate's probability for each bank request (rows of ``scalars``), sorted."""
    return np.sort(gate.probability(scalars, queries))


def catalog_bank_scores(
    gate: Gate, view: CatalogView, vectors: Vectors, texts: Sequence[str]
) -> Array:
    """The gate's probability for each bank request against one catalog, sorted (none
    for an empty catalog)."""
    if not len(view):
        return np.zeros(0)
    return bank_scores(gate, bank_scalars(view, vectors, texts), vectors.astype(np.float64))


def catalog_cutoff(gate: Gate, view: CatalogView, vectors: Vectors, texts: Sequence[str]) -> float:
    """The cutoff of one catalog (0 where the gate has no ``bank_quantile``)."""
    if not gate.spec.bank_quantile or not len(view):
        return 0.0
    return cutoff_of(gate, catalog_bank_scores(gate, view, vectors, texts))


def cutoff_of(gate: Gate, scored: Array) -> float:
    """The cutoff the bank's scores against a catalog (``scored``) give (0 where the gate
    has no ``bank_quantile`` or there are none)."""
    quantile = gate.spec.bank_quantile
    if not quantile or not len(scored):
        return 0.0
    return float(raised(np.quantile(scored, quantile), gate.spec.bank_margin))


def raised(level: Array | float, margin: float) -> Array:
    """``level`` (a probability, or many) ``margin`` higher in log-odds: a bank's quantile
    score made a cutoff. Levels of 0 stay 0 (no catalog, no cutoff)."""
    level = np.asarray(level, dtype=np.float64)
    if not margin:
        return level
    clipped = np.clip(level, 1e-6, 1 - 1e-6)
    result: Array = np.where(level > 0, 1 / (1 + (1 - clipped) / clipped * np.exp(-margin)), 0.0)
    return result


def bars(threshold: float, levels: Array, margin: float) -> Array:
    """Each row's bar: ``threshold``, or its catalog's cutoff where that is higher (the
    bank's quantile scores ``levels`` raised by ``margin``)."""
    result: Array = np.maximum(threshold, raised(levels, margin))
    return result


def cutoffs(
    gate: Gate,
    bank: BankRows,
    catalogs: npt.NDArray[np.int_],
    quantiles: Sequence[float] = QUANTILES,
) -> Array:
    """For each row (its catalog's index into ``bank``, -1: none) the cutoff at every
    quantile of ``quantiles`` (rows x quantiles)."""
    levels = np.zeros((len(bank.scalars), len(quantiles)))
    used = np.unique(catalogs[catalogs >= 0])
    n_bank = bank.queries.shape[0]
    for start in range(0, len(used), CHUNK):
        chunk = used[start : start + CHUNK]
        flat = bank.scalars[chunk].reshape(len(chunk) * n_bank, -1)
        queries = np.tile(bank.queries, (len(chunk), 1))
        scored = gate.probability(flat, queries).reshape(len(chunk), n_bank)
        levels[chunk] = np.quantile(scored, quantiles, axis=1).T
    result: Array = np.where((catalogs >= 0)[:, None], levels[np.maximum(catalogs, 0)], 0.0)
    return result
