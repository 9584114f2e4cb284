"""How well a request that needs no tool typically matches a catalog: its background.

In a broad catalog (a few hundred tools across many domains) almost any request has
some tool with a high cosine, so the best cosine alone says little: "What wine goes
well with fish?" is close to a recipe tool. When a catalog's gate is assembled, a
fixed bank of generic requests that need no tool (``bank.txt``: chit-chat, general
knowledge, writing, coding, arithmetic, advice, written for this bank and drawn from
no training or evaluation source) is scored against the catalog once; the best cosine
of each bank request is that catalog's background. A request is then read relative
to it (:data:`COVERAGE`): how many standard deviations its best cosine lies above the
background's mean, and the share of the bank it beats.

The bank's vectors ship in ``bank.npz`` (int8, one scale a vector) for the encoder
that file names; a gate reading another encoder embeds the texts once per process.
After editing the texts, ``python -m retriever.gate --bank`` writes the file again.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from retriever.embedder import Encoder, Vectors

BANK_TEXTS = Path(__file__).with_name("bank.txt")
BANK_VECTORS = Path(__file__).with_name("bank.npz")

#: The coverage scalars, after :data:`~retriever.gate.features.SCALARS` in a gate that
#: reads them: the best cosine's z-score against the background and the share of the
#: bank it beats.
COVERAGE = ("background_z", "background_share")

#: Catalog rows per product while the background is computed (bounds the memory of a
#: 47k-tool catalog's scores to bank x ROWS floats).
ROWS = 4096


@dataclass(frozen=True, slots=True)
class Background:
    """The best cosine of each bank request against one catalog, sorted."""

    best: npt.NDArray[np.float64]
    mean: float
    std: float

    @classmethod
    def of(cls, bank: Vectors, catalog: Vectors) -> Background:
        """``bank``'s best cosine against ``catalog`` (a non-empty one)."""
        best = np.full(len(bank), -1.0, dtype=np.float32)
        for start in range(0, len(catalog), ROWS):
            scores = bank @ catalog[start : start + ROWS].T
            best = np.maximum(best, scores.max(axis=1))
        ordered = np.sort(best.astype(np.float64))
        return cls(ordered, float(ordered.mean()), float(ordered.std()) + 1e-3)

    def features(self, best_cosine: float) -> tuple[float, float]:
        """The :data:`COVERAGE` scalars of a request whose best cosine is ``best_cosine``."""
        beaten = int(np.searchsorted(self.best, best_cosine, side="left"))
        return (best_cosine - self.mean) / self.std, beaten / len(self.best)

    def many_features(
        self, best_cosines: npt.NDArray[np.float64]
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """:meth:`features` of many requests: the z-scores and the shares, as columns."""
        beaten = np.searchsorted(self.best, best_cosines, side="left")
        return (best_cosines - self.mean) / self.std, beaten / len(self.best)


def bank_texts(path: Path = BANK_TEXTS) -> list[str]:
    """The bank's requests, one a line."""
    return [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


class BankVectors:
    """The bank's vectors by encoder: the shipped ones when they are of ``encoder``,
    otherwise embedded once and kept (one instance a process: :data:`BANK`)."""

    def __init__(self, texts: Path = BANK_TEXTS, vectors: Path = BANK_VECTORS) -> None:
        self._texts, self._vectors = texts, vectors
        self._known: dict[str, Vectors] = {}
        self._lock = threading.Lock()

    def of(self, encoder: Encoder) -> Vectors:
        with self._lock:
            if encoder.name not in self._known:
                self._known[encoder.name] = self._read(encoder)
            return self._known[encoder.name]

    def _read(self, encoder: Encoder) -> Vectors:
        texts = bank_texts(self._texts)
        shipped = read_shipped(self._vectors)
        if shipped is not None and shipped[0] == encoder.name and shipped[1] == texts:
            return shipped[2]
        return np.concatenate([encoder.encode(texts[i : i + 64]) for i in range(0, len(texts), 64)])


#: The process's bank vectors (read by every catalog's gate).
BANK = BankVectors()


def read_shipped(path: Path = BANK_VECTORS) -> tuple[str, list[str], Vectors] | None:
    """``(encoder, texts, vectors)`` of a bank file, the vectors back to unit length."""
    if not path.is_file():
        return None
    with np.load(path, allow_pickle=False) as data:
        scaled = data["vectors"].astype(np.float32) * data["scales"][:, None]
        unit = scaled / np.linalg.norm(scaled, axis=1, keepdims=True).clip(1e-12)
        return str(data["encoder"]), data["texts"].tolist(), unit.astype(np.float32)


def write_bank(encoder: Encoder, path: Path = BANK_VECTORS, texts: Path = BANK_TEXTS) -> None:
    """Embed the bank with ``encoder`` and write it as int8 (``python -m retriever.gate
    --bank``)."""
    lines = bank_texts(texts)
    vectors = np.concatenate([encoder.encode(lines[i : i + 64]) for i in range(0, len(lines), 64)])
    scales = np.abs(vectors).max(axis=1) / 127.0
    quantized = np.round(vectors / scales[:, None]).astype(np.int8)
    np.savez_compressed(
        path,
        encoder=np.array(encoder.name),
        texts=np.array(lines),
        vectors=quantized,
        scales=scales.astype(np.float32),
    )
