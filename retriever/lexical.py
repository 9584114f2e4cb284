"""BM25 over tool documents (bm25s's sparse scores; k1=0.9, b=0.4 as Pyserini's default).

Tokens are lower-case words of two or more characters, with identifiers split at
``_``, ``-`` and camelCase, and English stop words dropped.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import bm25s
import numpy as np
import numpy.typing as npt
from bm25s.stopwords import STOPWORDS_EN

_WORD = re.compile(r"[a-z0-9\u00c0-\uffff]{2,}")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_STOP = frozenset(STOPWORDS_EN)


def tokenize(text: str) -> list[str]:
    spaced = _CAMEL.sub(" ", text).lower()
    return [t for t in _WORD.findall(spaced.replace("_", " ")) if t not in _STOP]


class BM25Index:
    def __init__(self, texts: Sequence[str], *, k1: float = 0.9, b: float = 0.4) -> None:
        self._size = len(texts)
        self._model = bm25s.BM25(k1=k1, b=b)
        # bm25s refuses an empty document; a placeholder token no query can contain.
        corpus = [tokenize(text) or ["\x00"] for text in texts]
        if corpus:
            self._model.index(corpus, show_progress=False)

    def __len__(self) -> int:
        return self._size

    def scores(self, query: str) -> npt.NDArray[np.float32]:
        """One score per document, zero where no query word occurs."""
        vocab: dict[str, int] = getattr(self._model, "vocab_dict", {})
        tokens = [t for t in tokenize(query) if t in vocab]
        if not tokens or self._size == 0:
            return np.zeros(self._size, dtype=np.float32)
        scores = self._model.get_scores(tokens)
        return np.asarray(scores, dtype=np.float32)
