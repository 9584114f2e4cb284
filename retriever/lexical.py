"""BM25 over tool documents (bm25s's sparse scores). The class defaults are Pyserini's
(k1=0.9, b=0.4); the index takes ``retriever.bm25_k1``/``bm25_b`` (1.5, 0.75, chosen with
the score fusion leave-one-dataset-out, retriever/README.md).

Tokens are lower-case words of two or more characters, with identifiers split at
``_``, ``-`` and camelCase, and English stop words dropped.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import bm25s
import numpy as np
import numpy.typing as npt
import orjson
from bm25s.stopwords import STOPWORDS_EN

_WORD = re.compile(r"[a-z0-9\u00c0-\uffff]{2,}")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_STOP = frozenset(STOPWORDS_EN)


def tokenize(text: str) -> list[str]:
    spaced = _CAMEL.sub(" ", text).lower()
    return [t for t in _WORD.findall(spaced.replace("_", " ")) if t not in _STOP]


#: The arrays of bm25s's sparse score matrix (its own ``save`` writes the same three).
_STATE_ARRAYS = ("data", "indices", "indptr")


class BM25Index:
    def __init__(self, texts: Sequence[str], *, k1: float = 0.9, b: float = 0.4) -> None:
        self._size = len(texts)
        self._model = bm25s.BM25(k1=k1, b=b)
        # bm25s refuses an empty document; a placeholder token no query can contain.
        corpus = [tokenize(text) or ["\x00"] for text in texts]
        if corpus:
            self._model.index(corpus, show_progress=False)

    def state(self) -> dict[str, npt.NDArray[Any]]:
        """What :meth:`from_state` needs to give the same scores without tokenizing the
        corpus again (7.6 s over 47k tool documents on a busy machine): bm25s's score
        matrix, its vocabulary as JSON and the parameters."""
        scores = getattr(self._model, "scores", None)
        vocab: dict[str, int] = getattr(self._model, "vocab_dict", {})
        params = {"k1": self._model.k1, "b": self._model.b, "size": self._size}
        state = {
            "vocab": np.frombuffer(orjson.dumps(vocab), dtype=np.uint8),
            "params": np.frombuffer(orjson.dumps(params), dtype=np.uint8),
        }
        if scores is not None:
            state.update({name: np.asarray(scores[name]) for name in _STATE_ARRAYS})
        extra = getattr(self._model, "nonoccurrence_array", None)  # BM25L and BM25+ only
        if extra is not None:
            state["nonoccurrence"] = np.asarray(extra)
        return state

    @classmethod
    def from_state(cls, state: Mapping[str, npt.NDArray[Any]]) -> BM25Index:
        """The index :meth:`state` was taken of; raises KeyError or ValueError on a
        state that is not one."""
        params = orjson.loads(state["params"].tobytes())
        index = cls([], k1=float(params["k1"]), b=float(params["b"]))
        index._size = int(params["size"])
        if index._size:
            # bm25s's own ``load`` sets these five and nothing else.
            vocab = orjson.loads(state["vocab"].tobytes())
            index._model.nonoccurrence_array = state.get("nonoccurrence")
            index._model.vocab_dict = vocab
            index._model.unique_token_ids_set = set(vocab.values())
            index._model.scores = {
                **{name: state[name] for name in _STATE_ARRAYS},
                "num_docs": index._size,
            }
        return index

    @property
    def k1(self) -> float:
        return float(self._model.k1)

    @property
    def b(self) -> float:
        return float(self._model.b)

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
