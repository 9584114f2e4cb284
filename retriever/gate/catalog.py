"""The gate on a catalog: orchestrate's (its tools embedded once, then one query per
request) or the tools a client sent (select mode)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from retriever.batching import BatchingEmbedder
from retriever.embedder import Encoder, Vectors
from retriever.errors import ModelNotFound
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
            self.view = CatalogView(matrix, tuple(words[0]), tuple(words[1]))
        else:
            self.view = CatalogView.of(matrix, documents)

    def decide(self, query: str, threshold: float | None = None) -> Decision:
        """Whether a tool of this catalog serves ``query`` (the conversation's recent
        turns), at ``threshold`` (None: the gate's own)."""
        if not len(self.view):
            return Decision(False, 0.0)
        vector = self._encoder.encode([query or " "])[0]
        return self.gate.decide(vector, query, self.view, threshold)


async def decide_for_tools(
    gate: Gate, embedder: BatchingEmbedder, documents: Sequence[str], query: str
) -> Decision:
    """The gate on a client's own tools (select mode): their vectors come from the
    embedder's cache when the client sent the same tools before."""
    if not documents:
        return Decision(False, 0.0)
    vectors = await embedder.embed([query or " ", *documents])
    return gate.decide(vectors[0], query, CatalogView.of(vectors[1:], documents))
