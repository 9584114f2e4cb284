"""A request that asks for several things, cut into its clauses, each searched too.

"Find me a hotel in Rome, and also convert 200 dollars to euros" needs two tools, and
one vector for the whole text lands between them. The dense side of a search therefore
scores each tool by its best cosine over the whole text and each of its clauses; BM25
still reads the whole text, and the two rankings are fused as before
(:meth:`retriever.index.ToolIndex.search` with several query rows).

The rule was chosen leave-one-dataset-out over the eight training sets, each held-out
fold choosing the same one (cut at sentence ends and at ", and", "and also", "and then",
"as well as"; the best cosine, not a fusion of rankings): held-out NDCG@5 66.1 → 66.8;
then scored once on the unseen sets, toolbench_stable's sample 55.6 → 59.7 and
Seal-Tools 68.9 → 86.5 (the study's script, ``eval/retrieval_clauses.py``, is in git history).
"""

from __future__ import annotations

import re

import numpy as np

from retriever.encoder import Encoder, Vectors

#: Fewer words than this is not a request of its own ("Thanks.", "Please.").
MIN_WORDS = 3
#: Clauses searched at most, the first ones: each is one more row to embed, and a
#: 51 KB query of a thousand sentences once cost 51.7 s of CPU.
MAX_CLAUSES = 16

SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n+")
CONNECTIVE = re.compile(
    r",?\s+and\s+(?:also|then)\s+|,\s+and\s+|,\s+(?:also|then)\s+|\s+as well as\s+", re.I
)


def cut(text: str, inner: re.Pattern[str] | None = CONNECTIVE) -> list[str]:
    """``text`` cut at sentence ends, then at ``inner`` (none: sentences only); parts of
    fewer than :data:`MIN_WORDS` words dropped."""
    parts = [part for part in SENTENCE.split(text) if part.strip()]
    if inner is not None:
        parts = [clause for part in parts for clause in inner.split(part)]
    return [part.strip() for part in parts if len(part.split()) >= MIN_WORDS]


def split_clauses(text: str) -> list[str]:
    """The requests ``text`` joins, in order, the first :data:`MAX_CLAUSES`; none when it
    holds fewer than two."""
    parts = cut(text)
    return parts[:MAX_CLAUSES] if len(parts) >= 2 else []


def query_rows(encoder: Encoder, text: str) -> Vectors:
    """The rows a search reads for ``text``: the whole text first, then its clauses."""
    rows = encoder.encode([text, *split_clauses(text)])
    return np.ascontiguousarray(rows, dtype=np.float32)


def with_clauses(encoder: Encoder, text: str, vector: Vectors) -> Vectors:
    """``vector`` (the whole text's) with the rows of ``text``'s clauses under it, embedded
    in one call; ``vector`` itself when the text holds one request, so that it costs no
    more than before (one row, nothing embedded here)."""
    clauses = split_clauses(text)
    if not clauses:
        return vector
    whole = np.asarray(vector, dtype=np.float32).reshape(1, -1)
    rows = np.vstack([whole, encoder.encode(clauses)])
    return np.ascontiguousarray(rows, dtype=np.float32)


def best_scores(documents: Vectors, query: Vectors) -> Vectors:
    """Each document's cosine with ``query``, its best row's when it has several."""
    if query.ndim == 1:
        scores: Vectors = documents @ query
        return scores
    best: Vectors = (documents @ query.T).max(axis=1)
    return best
