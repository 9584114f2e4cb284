"""A learned linear map on the frozen encoder's vectors, shipped with the package.

The bundled all-MiniLM-L6-v2 is never changed; :class:`Adapter` maps its normalised
vectors through one ``dim x dim`` matrix (identity plus what training learned) and
normalises again. Queries and tool documents go through the same map, so a catalog
indexed with the adapted encoder and a query embedded with it meet in one space, and
every caller of :func:`retriever.embedder.load_encoder` (the proxy's catalog search
and select mode, ``toolgraph eval retrieval``) gets the same default.

The artifact is an ``.npz`` with ``matrix`` (float32) and ``base_model`` (the encoder
name it was trained on); ``python -m retriever.finetune.adapter`` writes it
(retriever/README.md, "Learned retrieval"). The same setting may name fine-tuned
layers instead (``delta/<parameter>`` arrays, :mod:`retriever.delta`): those change the
network itself, so :func:`retriever.embedder.load_encoder` builds the encoder with them
rather than wrapping it.
"""

from __future__ import annotations

import hashlib
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from retriever.delta import AdapterError as AdapterError
from retriever.delta import WeightDelta, delta_from_arrays
from retriever.encoder import EncodeCounts, Encoder, Vectors

#: The linear map trained for the bundled MiniLM, committed with the package.
LINEAR_ADAPTER = Path(__file__).parent / "adapters" / "minilm-l6-v2.npz"

#: The bundled MiniLM's fine-tuned top layer, committed with the package.
FINETUNED_LAYERS = Path(__file__).parent / "adapters" / "minilm-l6-v2-top1.npz"

#: What ``retriever.adapter`` loads when ``adapter_path`` is unset.
BUNDLED_ADAPTER = LINEAR_ADAPTER


@dataclass(frozen=True)
class Adapter:
    matrix: Vectors
    base_model: str
    digest: str

    def apply(self, vectors: Vectors) -> Vectors:
        """Each row mapped and normalised again."""
        mapped = vectors @ self.matrix
        norms = np.linalg.norm(mapped, axis=1, keepdims=True).clip(1e-12)
        out: Vectors = (mapped / norms).astype(np.float32)
        return out


def load_adapter(path: Path) -> Adapter | WeightDelta:
    """The adapter at ``path`` (a linear map or fine-tuned layers); :class:`AdapterError`
    naming the path when it is absent or not an adapter."""
    if not path.is_file():
        raise AdapterError(
            f"no retrieval adapter at {path} (retriever.adapter_path): an .npz written by "
            "`python -m retriever.finetune.adapter` is needed, or set retriever.adapter: false"
        )
    try:
        with np.load(path, allow_pickle=False) as data:
            base_model = str(data["base_model"])
            deltas = {k[len("delta/") :]: data[k] for k in data.files if k.startswith("delta/")}
            if deltas:
                return delta_from_arrays(deltas, base_model)
            matrix = np.asarray(data["matrix"], dtype=np.float32)
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
        raise AdapterError(
            f"{path} is not a retrieval adapter (an .npz with 'base_model' and 'matrix' or "
            f"'delta/…' arrays): {exc}"
        ) from exc
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1]:
        raise AdapterError(f"{path}: 'matrix' must be square, got shape {matrix.shape}")
    digest = hashlib.blake2b(matrix.tobytes(), digest_size=6).hexdigest()
    return Adapter(matrix, base_model, digest)


class AdaptedEncoder:
    """An encoder whose vectors pass through an :class:`Adapter`; ``base`` is the frozen
    encoder (bulk embedding caches its vectors, so changing the adapter re-embeds
    nothing)."""

    def __init__(self, base: Encoder, adapter: Adapter) -> None:
        if adapter.matrix.shape[0] != base.dim:
            raise AdapterError(
                f"the adapter maps {adapter.matrix.shape[0]}-dimensional vectors but "
                f"{base.name} makes {base.dim}-dimensional ones"
            )
        # An ONNX export at another precision (``…:onnx-int8``) is the same model's space.
        if adapter.base_model != base.name.split(":onnx-")[0]:
            raise AdapterError(
                f"the adapter was trained on {adapter.base_model}, not on {base.name}: "
                "train one for this model or set retriever.adapter: false"
            )
        self.base = base
        self.adapter = adapter
        self._name = f"{base.name}+adapter-{adapter.digest}"

    @property
    def name(self) -> str:
        return self._name

    @property
    def dim(self) -> int:
        return self.base.dim

    @property
    def counts(self) -> EncodeCounts:
        return self.base.counts

    def encode(self, texts: list[str]) -> Vectors:
        return self.adapter.apply(self.base.encode(texts))
