"""The gate on a catalog: orchestrate's (its tools embedded once, then one query per
request) or the tools a client sent (select mode)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from retriever.batching import BatchingEmbedder
from retriever.embedder import Encoder, Vectors
from retriever.errors import ModelNotFound
from retriever.gate.background import BANK, Background, bank_texts
from retriever.gate.cutoff import catalog_bank_scores, catalog_cutoff, cutoff_of
from retriever.gate.features import CatalogView
from retriever.gate.model import Decision, Gate

#: Tool documents per forward pass while a catalog is embedded.
BATCH = 64


class CatalogGate:
    """``decide`` blocks on one forward pass: call it from a worker thread."""

    def __init__(
        self,
        gate: Gate,
        encoder: Encoder,
        documents: Sequence[str],
        known: dict[str, Vectors] | None = None,
        words: tuple[Sequence[frozenset[str]], Sequence[frozenset[str]]] | None = None,
    ) -> None:
        """``known``: document vectors from an earlier load, kept up to date here, so that
        a reload embeds only the tools that changed. ``words``: the content words of
        each document and of its name (:class:`CatalogView`), taken before (an index
        snapshot's): working them out took 3.1 of a profiled 6.1 s restart over 47k
        tools."""
        if encoder.name != gate.encoder:
            raise ModelNotFound(
                f"the gate was fitted on {gate.encoder}'s vectors, not {encoder.name}'s"
            )
        self.gate = gate
        self.documents = list(documents)
        self._encoder = encoder
        known = {} if known is None else known
        missing = list(dict.fromkeys(d for d in documents if d not in known))
        for start in range(0, len(missing), BATCH):
            batch = missing[start : start + BATCH]
            known.update(zip(batch, encoder.encode(batch), strict=True))
        for gone in set(known) - set(documents):  # tools removed since
            del known[gone]
        matrix = (
            np.stack([known[d] for d in documents])
            if documents
            else np.zeros((0, encoder.dim), np.float32)
        )
        if words is not None and len(words[0]) == len(words[1]) == len(documents):
            view = CatalogView(matrix, tuple(words[0]), tuple(words[1]))
        else:
            view = CatalogView.of(matrix, documents)
        # The catalog's background, the bank's scores and the cutoff, once per catalog
        # version (the bank's requests against every tool; timed in retriever/gate/README.md).
        if gate.reads_coverage:
            view = view.with_background(BANK.of(encoder))
        self.view = view
        #: The gate's scores of the bank's requests (which need no tool) against this
        #: catalog, sorted: in a broad catalog they score high too (:meth:`bank_level`).
        self.bank_scores = catalog_bank_scores(gate, view, BANK.of(encoder), bank_texts())
        self.cutoff = cutoff_of(gate, self.bank_scores) if gate.cuts else 0.0

    def bank_level(self, quantile: float) -> float:
        """The ``quantile`` quantile of :attr:`bank_scores` (0 for an empty catalog): a
        score under it is no proof that a tool is needed, whatever its size."""
        return float(np.quantile(self.bank_scores, quantile)) if len(self.bank_scores) else 0.0

    def decide(self, query: str, threshold: float | None = None) -> Decision:
        """Whether a tool of this catalog serves ``query`` (the conversation's recent
        turns), at ``threshold`` (None: the gate's own)."""
        if not len(self.view):
            return Decision(False, 0.0)
        return self.decide_vector(self._encoder.encode([query or " "])[0], query, threshold)

    def decide_vector(
        self, vector: Vectors, query: str, threshold: float | None = None
    ) -> Decision:
        """:meth:`decide` for a query already embedded (``vector``)."""
        return self.gate.decide(vector, query, self.view, threshold, self.cutoff)


class CatalogMemory:
    """The backgrounds and cutoffs of the tool lists clients sent lately, by their
    documents: select mode's gate works them out once a list (1.5 ms for five tools),
    not once a request. Bounded; the oldest list goes first."""

    def __init__(self, size: int = 256) -> None:
        self._known: OrderedDict[tuple[str, ...], tuple[Background | None, float]] = OrderedDict()
        self._size = size

    def get(self, documents: tuple[str, ...]) -> tuple[Background | None, float] | None:
        found = self._known.get(documents)
        if found is not None:
            self._known.move_to_end(documents)
        return found

    def put(self, documents: tuple[str, ...], found: tuple[Background | None, float]) -> None:
        self._known[documents] = found
        while len(self._known) > self._size:
            self._known.popitem(last=False)


async def decide_for_tools(
    gate: Gate,
    embedder: BatchingEmbedder,
    documents: Sequence[str],
    query: str,
    memory: CatalogMemory | None = None,
) -> Decision:
    """The gate on a client's own tools (select mode): their vectors come from the
    embedder's cache when the client sent the same tools before, their background and
    cutoff from ``memory``."""
    if not documents:
        return Decision(False, 0.0)
    vectors = await embedder.embed([query or " ", *documents])
    view = CatalogView.of(vectors[1:], documents)
    if not (gate.reads_coverage or gate.cuts):
        return gate.decide(vectors[0], query, view)
    key = tuple(documents)
    found = memory.get(key) if memory is not None else None
    if found is None:
        found = await asyncio.to_thread(_background_and_cutoff, gate, embedder.encoder, view)
        if memory is not None:
            memory.put(key, found)
    background, cutoff = found
    return gate.decide(
        vectors[0], query, dataclasses.replace(view, background=background), None, cutoff
    )


def _background_and_cutoff(
    gate: Gate, encoder: Encoder, view: CatalogView
) -> tuple[Background | None, float]:
    bank = BANK.of(encoder)
    if gate.reads_coverage:
        view = view.with_background(bank)
    cutoff = catalog_cutoff(gate, view, bank, bank_texts()) if gate.cuts else 0.0
    return view.background, cutoff
