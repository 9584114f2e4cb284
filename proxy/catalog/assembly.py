"""A catalog made of its parts: the planner over an index, and the no-tool gate.

The gate and the planner read the request through one memory of recent vectors
(:mod:`retriever.recent`): a question costs one forward pass, not one for the gate,
one for the plan and one for the plan memory. The gate embeds the tools it weighs a
request against once per process, kept in the data folder's embeddings cache, so a
restart embeds none of them again. Runs in the loader's worker thread.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from graph_store.models import Tool
from graph_store.store import GraphStore
from proxy.catalog.loaded import Catalog
from proxy.config import Settings

if TYPE_CHECKING:  # loaded with the catalog, so that passthrough never imports them
    from proxy.learning.service import Learner
    from proxy.plan.memory import PlanMemory
    from retriever.embedder import Encoder, Vectors
    from retriever.gate.catalog import CatalogGate
    from retriever.index import ToolIndex
    from retriever.snapshot import GateVectors


class Assembler:
    """Builds catalogs for one process. It keeps the gate's tool vectors over loads (a
    cache that only grows, read by the gates it built, written only by the loader's
    thread)."""

    def __init__(self, settings: Settings, learner: Learner | None = None) -> None:
        """``learner``: what plans read of their tenant's traffic, its observed edges and
        served queries (None: nothing)."""
        self._settings = settings
        self._learner = learner
        self._gate_vectors: dict[str, Vectors] = {}

    def catalog(
        self,
        store: GraphStore,
        index: ToolIndex,
        tools: Mapping[str, Tool],
        encoder: Encoder,
        memory: PlanMemory | None,
        gate: CatalogGate | None,
    ) -> Catalog:
        from proxy.plan.candidates import CandidateFinder, weights_from
        from proxy.plan.planner import RequestPlanner
        from retriever.recent import remembering

        planner = self._settings.planner
        remembered = remembering(encoder)
        # Every search of the catalog (a sub-task's, the whole request's, the console's,
        # /mcp's) reads a text's clauses too when the retriever does (retriever.clauses),
        # embedded through the same memory as the question.
        clauses = remembered if self._settings.retriever.clauses else None
        finder = CandidateFinder(
            store, index, weights_from(planner), mode=planner.graph_mode, clauses=clauses
        )
        learner, traffic = self._learner, None
        if learner is not None and learner.options.retrieval:
            from proxy.learning.retrieval import TrafficRetrieval

            traffic = TrafficRetrieval(finder, remembered, learner).current
        evidence = None if learner is None else learner.evidence
        planning = RequestPlanner(finder, remembered, planner, memory, evidence, traffic=traffic)
        return Catalog(store, planning, tools, gate)

    def catalog_of(
        self,
        store: GraphStore,
        index: ToolIndex,
        tools: list[Tool],
        encoder: Encoder,
        memory: PlanMemory | None,
    ) -> Catalog:
        """The catalog of ``tools`` as read, its gate (when on) embedding their documents."""
        gate = self.gate(gate_documents(tools)) if self._settings.orchestrate.gate else None
        by_name = {tool.name: tool for tool in tools}
        return self.catalog(store, index, by_name, encoder, memory, gate)

    def gate(self, documents: list[str], known: GateVectors | None = None) -> CatalogGate:
        """``known``: the gate's vectors an index snapshot carries, taken when they are of
        the encoder the gate reads."""
        from retriever.embedder import load_encoder
        from retriever.gate.catalog import CatalogGate
        from retriever.gate.model import configured_gate
        from retriever.recent import remembering

        # The gate reads the encoder it was fitted on whatever encoder the index uses
        # (the same loaded copy when it is the index's too).
        gate = configured_gate(self._settings.retriever)
        encoder = load_encoder(gate.encoder_config(self._settings.retriever))
        words = None
        if known is not None and known.encoder == encoder.name:
            self._gate_vectors.update(zip(known.documents, known.vectors, strict=True))
            if known.documents == documents:
                words = (known.words, known.names)
        self._gate_vectors_from_disk(encoder, documents)
        return CatalogGate(gate, remembering(encoder), documents, self._gate_vectors, words)

    def _gate_vectors_from_disk(self, encoder: Encoder, documents: list[str]) -> None:
        """The gate's vectors of tools this process has not seen, from the embeddings
        cache in the data folder (embedded and left there when absent): a restart embeds
        none of them again, where it used to embed every tool of the catalog."""
        from retriever.bulk import embed_documents

        missing = list(dict.fromkeys(d for d in documents if d not in self._gate_vectors))
        if not missing:
            return
        cache = self._settings.data_dir / "embeddings"
        vectors = embed_documents(encoder, missing, cache_dir=cache, progress=False)
        self._gate_vectors.update(zip(missing, vectors, strict=True))


def gate_documents(tools: Iterable[Tool]) -> list[str]:
    """The text the gate weighs a request against, one per tool."""
    from retriever.documents import tool_fields
    from retriever.gate.features import gate_document

    return [gate_document(tool_fields(tool)) for tool in tools]
