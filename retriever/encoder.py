"""What the retriever needs of an embedding model, apart from any one model.

:mod:`retriever.embedder` loads the real ones; :mod:`retriever.adapter` wraps one.
Both import this module, so neither imports the other's internals.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

Vectors = npt.NDArray[np.float32]


@dataclass
class EncodeCounts:
    """What an encoder has computed since it was loaded: forward passes, texts, and token
    positions (padding included: a pass costs its longest text times its texts)."""

    passes: int = 0
    texts: int = 0
    tokens: int = 0

    def add(self, texts: int, tokens: int) -> None:
        self.passes += 1
        self.texts += texts
        self.tokens += tokens


class Encoder(Protocol):
    """What the rest of the retriever needs of a model."""

    @property
    def name(self) -> str: ...

    @property
    def dim(self) -> int: ...

    @property
    def counts(self) -> EncodeCounts:
        """What it has computed so far (shared by a wrapper and what it wraps)."""
        ...

    def encode(self, texts: list[str]) -> Vectors:
        """One row per text, normalised; one forward pass (callers batch)."""
        ...
