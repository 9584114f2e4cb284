"""Reranking a first stage's top candidates by late interaction.

A query and each candidate tool are read as token vectors (:mod:`retriever.rerank.tokens`);
a tool's reranker score is MaxSim: the mean over the query's tokens of each one's best
cosine among the tool's tokens. A tool's token vectors depend on its document alone, so
they are computed once per document text (kept by the text's digest, in memory) and a
request pays one short pass for its query plus a product of a few thousand numbers per
candidate. The order returned is by ``MaxSim + first_stage_weight x the first stage's
score`` (the fused score, in [0, 1]).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from retriever._onnx_export import Precision
from retriever.rerank.tokens import TokenEncoder, TokenVectors
from retriever.rerank.weights import MAX_QUERY_TOKENS, MAX_TOOL_TOKENS, RerankWeights

#: Tool documents whose token vectors are kept (about 12 kB each).
TOOLS_KEPT = 100_000


def maxsim(query: TokenVectors, tools: Sequence[TokenVectors]) -> np.ndarray:
    """Each tool's MaxSim against ``query``: the mean over the query's tokens of the best
    cosine among the tool's tokens."""
    if not tools:
        return np.zeros(0, dtype=np.float32)
    lengths = [len(t) for t in tools]
    sims = np.concatenate(tools) @ query.T  # [all tool tokens, query tokens]
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    best = np.maximum.reduceat(sims, starts, axis=0)  # [tools, query tokens]
    out: np.ndarray = best.mean(axis=1).astype(np.float32)
    return out


class Reranker:
    """Scores candidates of one catalog or of a client's tools; thread-safe."""

    def __init__(
        self,
        model: Path,
        weights: RerankWeights,
        folder: Path,
        *,
        first_stage_weight: float,
        threads: int = 1,
        precision: Precision = "int8",
    ) -> None:
        from retriever.embedder import limit_blas

        # MaxSim is one small product a request; with OpenBLAS's own threads spinning on
        # busy cores it took 28 ms instead of 0.3 ms (docs/benchmarks.md, "Retrieval").
        limit_blas(threads)
        self.model = model
        self.weights = weights
        self.encoder = TokenEncoder(model, weights, folder, threads=threads, precision=precision)
        self.name = f"rerank-{weights.digest}"
        self.first_stage_weight = first_stage_weight
        self._tools: OrderedDict[bytes, TokenVectors] = OrderedDict()
        self._lock = threading.Lock()

    def tool_tokens(self, texts: Sequence[str], batch: int = 32) -> list[TokenVectors]:
        """Token vectors of tool documents: kept ones from memory, the others computed
        (``batch`` texts a pass) and kept."""
        keys = [hashlib.blake2b(t.encode(), digest_size=16).digest() for t in texts]
        with self._lock:
            found = {k: self._tools[k] for k in keys if k in self._tools}
        missing = sorted({k: t for k, t in zip(keys, texts, strict=True) if k not in found}.items())
        for start in range(0, len(missing), batch):
            part = missing[start : start + batch]
            vectors = self.encoder.encode([t for _, t in part], MAX_TOOL_TOKENS)
            found.update(
                (k, v.astype(np.float16)) for (k, _), v in zip(part, vectors, strict=False)
            )
        with self._lock:
            for key in keys:
                self._tools[key] = found[key]
                self._tools.move_to_end(key)
            while len(self._tools) > TOOLS_KEPT:
                self._tools.popitem(last=False)
        return [found[k] for k in keys]

    def query_tokens(self, query: str) -> TokenVectors:
        return self.encoder.encode([query], MAX_QUERY_TOKENS)[0]

    def scores(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """MaxSim of each tool document against ``query``."""
        tools = [t.astype(np.float32) for t in self.tool_tokens(texts)]
        return maxsim(self.query_tokens(query), tools)

    def order(self, query: str, texts: Sequence[str], first_stage: Sequence[float]) -> list[int]:
        """Indexes of ``texts`` best first, with the combined score of each."""
        combined = self.combined(query, texts, first_stage)
        return [int(i) for i in np.argsort(-combined, kind="stable")]

    def combined(
        self, query: str, texts: Sequence[str], first_stage: Sequence[float]
    ) -> np.ndarray:
        stage = np.asarray(first_stage, dtype=np.float32)
        out: np.ndarray = self.scores(query, texts) + self.first_stage_weight * stage
        return out
