"""The vectors of the last few short texts an encoder was asked for, kept in process.

One orchestrated request embeds its question up to three times: the gate reads it,
the planner searches with it (the same text, through the same base model: the
adapter is applied after), and the plan memory stores the sub-tasks the planner has
just embedded. A profile of ``eval/bench_orchestrate`` put each forward pass at
about 5.5 ms of CPU, the largest part of toolgraph's own time per request; with
this memo the request pays one.

Only calls of at most :data:`SHORT_CALL` texts are remembered (queries and
sub-tasks); catalog documents come in larger batches and go straight to the model,
with the disk cache of :mod:`retriever.bulk` in front of them. A remembered vector
is the one an earlier pass computed, possibly next to other texts: the same to the
float32 rounding of a padded batch.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict

import numpy as np

from retriever.adapter import AdaptedEncoder
from retriever.encoder import EncodeCounts, Encoder, Vectors

#: Calls of at most this many texts are looked up and remembered.
SHORT_CALL = 8
#: Texts remembered (a 384-dimensional vector is 1.5 kB).
REMEMBERED = 256


def remembering(encoder: Encoder) -> Encoder:
    """``encoder`` answering short calls from one memory per base model, so that the
    gate (the bare model) and the planner (the model and the adapter) share its passes."""
    if isinstance(encoder, AdaptedEncoder):
        return AdaptedEncoder(remembering(encoder.base), encoder.adapter)
    if isinstance(encoder, RecentVectors):
        return encoder
    memo = _memos.get(encoder)
    if memo is None:
        memo = _memos[encoder] = RecentVectors(encoder)
    return memo


class RecentVectors:
    """An :class:`Encoder` that answers short calls from the texts it saw last.

    Thread-safe: the gate, the planner and the plan memory call it from worker threads.
    """

    def __init__(self, encoder: Encoder, size: int = REMEMBERED) -> None:
        self.encoder = encoder
        self._size = size
        self._vectors: OrderedDict[str, Vectors] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self.encoder.name

    @property
    def dim(self) -> int:
        return self.encoder.dim

    @property
    def counts(self) -> EncodeCounts:
        return self.encoder.counts

    def encode(self, texts: list[str]) -> Vectors:
        if len(texts) > SHORT_CALL or self._size == 0:
            return self.encoder.encode(texts)
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        known = self._recall(texts)
        missing = list(dict.fromkeys(t for t in texts if t not in known))
        if missing:
            fresh = dict(zip(missing, self.encoder.encode(missing), strict=True))
            self._keep(fresh)
            known.update(fresh)
        return np.stack([known[text] for text in texts])

    def _recall(self, texts: list[str]) -> dict[str, Vectors]:
        with self._lock:
            found = {text: self._vectors[text] for text in texts if text in self._vectors}
            for text in found:
                self._vectors.move_to_end(text)
        return found

    def _keep(self, fresh: dict[str, Vectors]) -> None:
        with self._lock:
            for text, vector in fresh.items():
                self._vectors[text] = vector.copy()  # not a view holding its whole batch
                self._vectors.move_to_end(text)
            while len(self._vectors) > self._size:
                self._vectors.popitem(last=False)


_memos: weakref.WeakKeyDictionary[Encoder, RecentVectors] = weakref.WeakKeyDictionary()
