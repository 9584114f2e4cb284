"""What the gate reads of a request and a catalog: a few scores and the query's vector.

The scores say how well the best tools match (cosine of the query against every
tool document: the best, the second, the mean of the top three, the best's lead
over the second and over the catalog's mean, the spread of all; the share of the
query's content words found in one tool's document, and the largest share of one
tool name's words the query says) and what the request is like (its length, whether
it holds a number: tool calls carry arguments). Not the catalog's
size: in the training data big catalogs (CLINC150's) mostly serve their requests and
small ones (BFCL's) often do not, a coincidence that sent "Thanks!" to 300 tools.
The query's own vector lets the model learn what chit-chat and general-knowledge
questions look like whatever the catalog. A gate may also read the best cosine relative
to the catalog's background (:mod:`~retriever.gate.background`): how well requests that
need no tool typically match this catalog.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from retriever.documents import ToolFields, document_text, name_words
from retriever.embedder import Vectors
from retriever.gate.background import Background

#: Characters of a tool's document: the encoder reads 256 tokens at most anyway.
MAX_DOCUMENT_CHARS = 1000

SCALARS = (
    "max_cosine",
    "second_cosine",
    "top3_cosine",
    "lead_over_second",
    "lead_over_mean",
    "word_overlap",
    "log_words",
    "name_overlap",
    "cosine_spread",
    "has_number",
)

_WORD = re.compile(r"[a-z0-9]+")
_DIGIT = re.compile(r"[0-9]")
_STOP = frozenset(
    """the a an and or of to in on for with at by from is are was were be been it this that
    what which who whom how when where why can could would should will shall may might do does
    did i me my you your we our us they them their he she his her its please want need like
    some any all get give tell show find make let there here about into than then so if not no
    yes just also very much many more most""".split()  # noqa: SIM905 (a list literal: 90 lines)
)


def gate_document(fields: ToolFields) -> str:
    """A tool as the gate embeds it: name and description (parameters add little to
    "is this tool about the request" and cost embedding time)."""
    return document_text(fields, "name_description")[:MAX_DOCUMENT_CHARS]


@functools.lru_cache(maxsize=4096)  # the bank's requests, at every catalog load
def content_words(text: str) -> frozenset[str]:
    """Lower-cased words that carry meaning (no stop words, no single letters)."""
    return frozenset(
        w for w in _WORD.findall(text.lower().replace("_", " ")) if len(w) > 1 and w not in _STOP
    )


@dataclass(frozen=True, slots=True)
class CatalogView:
    """A catalog as the gate reads it: document vectors and content words, computed once."""

    vectors: Vectors
    words: tuple[frozenset[str], ...]
    names: tuple[frozenset[str], ...]  # the content words of each tool's name
    #: The bank's best cosines against this catalog; None: not computed (a gate that does
    #: not read the coverage scalars).
    background: Background | None = None

    @classmethod
    def of(
        cls, vectors: Vectors, documents: Sequence[str], bank: Vectors | None = None
    ) -> CatalogView:
        """``bank``: the background bank's vectors, when the gate reads coverage."""
        return cls(
            vectors,
            tuple(content_words(text) for text in documents),
            tuple(content_words(name_words(_tool_name(text))) for text in documents),
            _background(bank, vectors),
        )

    def with_background(self, bank: Vectors) -> CatalogView:
        """This view with the background of ``bank`` (a catalog's, computed once)."""
        return dataclasses.replace(self, background=_background(bank, self.vectors))

    def __len__(self) -> int:
        return len(self.words)


def scalar_features(
    query_vector: Vectors, query_text: str, catalog: CatalogView, *, coverage: bool = False
) -> npt.NDArray[np.float64]:
    """The :data:`SCALARS` of one request against a non-empty catalog, and with
    ``coverage`` the :data:`~retriever.gate.background.COVERAGE` ones after them (the
    catalog's background must have been computed)."""
    cosines = np.sort(catalog.vectors @ query_vector)[::-1].astype(np.float64)
    best = float(cosines[0])
    second = float(cosines[1]) if len(cosines) > 1 else best
    words = content_words(query_text)
    overlap = max(_overlap(words, document) for document in catalog.words)
    relative: tuple[float, ...] = ()
    if coverage:
        if catalog.background is None:
            raise ValueError("the coverage scalars need the catalog's background")
        relative = catalog.background.features(best)
    return np.array(
        [
            best,
            second,
            float(cosines[:3].mean()),
            best - second,
            best - float(cosines.mean()),
            overlap,
            math.log1p(len(words)),
            max(_covered(name, words) for name in catalog.names),
            float(cosines.std()),
            float(bool(_DIGIT.search(query_text))),
            *relative,
        ]
    )


def batch_scalar_features(
    query_vectors: Vectors, query_texts: Sequence[str], catalog: CatalogView, *, coverage: bool
) -> npt.NDArray[np.float64]:
    """:func:`scalar_features` of many requests against one catalog at once (rows alike,
    to rounding): the word shares by an inverted index instead of a set per tool, so that
    the bank's requests against a catalog of thousands of tools take a second, not ten."""
    cosines = (query_vectors @ catalog.vectors.T).astype(np.float64)
    top = -np.sort(np.partition(-cosines, min(2, cosines.shape[1] - 1), axis=1)[:, :3], axis=1)
    if top.shape[1] < 3:  # fewer than three tools: the best repeats, as the mean of top 3 does
        top = np.hstack([top, np.repeat(top[:, -1:], 3 - top.shape[1], axis=1)])
    best = top[:, 0]
    second = top[:, 1] if cosines.shape[1] > 1 else best
    top3 = top[:, : min(3, cosines.shape[1])].mean(axis=1)
    words = [content_words(text) for text in query_texts]
    overlap, named = _word_shares(words, catalog)
    columns = [
        best,
        second,
        top3,
        best - second,
        best - cosines.mean(axis=1),
        overlap,
        np.log1p([len(w) for w in words]),
        named,
        cosines.std(axis=1),
        np.array([float(bool(_DIGIT.search(text))) for text in query_texts]),
    ]
    if coverage:
        if catalog.background is None:
            raise ValueError("the coverage scalars need the catalog's background")
        columns += list(catalog.background.many_features(best))
    return np.stack(columns, axis=1)


def _word_shares(
    queries: Sequence[frozenset[str]], catalog: CatalogView
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """For each query, the largest share of its words one tool's document holds and the
    largest share of one tool name's words it says."""
    documents: dict[str, list[int]] = {}
    names: dict[str, list[int]] = {}
    for i, (document, name) in enumerate(zip(catalog.words, catalog.names, strict=True)):
        for word in document:
            documents.setdefault(word, []).append(i)
        for word in name:
            names.setdefault(word, []).append(i)
    overlap, named = np.zeros(len(queries)), np.zeros(len(queries))
    for row, words in enumerate(queries):
        if not words:
            continue
        in_documents: dict[int, int] = {}
        in_names: dict[int, int] = {}
        for word in words:
            for i in documents.get(word, ()):
                in_documents[i] = in_documents.get(i, 0) + 1
            for i in names.get(word, ()):
                in_names[i] = in_names.get(i, 0) + 1
        overlap[row] = max(in_documents.values(), default=0) / len(words)
        named[row] = max((n / len(catalog.names[i]) for i, n in in_names.items()), default=0.0)
    return overlap, named


def _background(bank: Vectors | None, vectors: Vectors) -> Background | None:
    return None if bank is None or not len(vectors) else Background.of(bank, vectors)


def _tool_name(document: str) -> str:
    """The name part of a ``name: description`` document (all of a name-only one)."""
    return document.split(":", 1)[0]


def _covered(name: frozenset[str], query: frozenset[str]) -> float:
    """Share of a tool name's words the query says: "get weather" in "weather in Oslo" 1/2."""
    return len(name & query) / len(name) if name else 0.0


def _overlap(query: frozenset[str], document: frozenset[str]) -> float:
    if not query:
        return 0.0
    return len(query & document) / len(query)
