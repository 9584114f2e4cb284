"""What the retriever needs of an embedding model, apart from any one model.

:mod:`retriever.embedder` loads the real ones; :mod:`retriever.adapter` wraps one.
Both import this module, so neither imports the other's internals.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import numpy.typing as npt

Vectors = npt.NDArray[np.float32]


class Encoder(Protocol):
    """What the rest of the retriever needs of a model."""

    @property
    def name(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def encode(self, texts: list[str]) -> Vectors:
        """One row per text, normalised; one forward pass (callers batch)."""
        ...
