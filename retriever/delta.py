"""Fine-tuned layers shipped as what changed: float16 deltas on the bundled weights.

The fine-tuned encoder (``python -m retriever.finetune.layers``, retriever/README.md,
"Learned retrieval") differs from the bundled all-MiniLM-L6-v2 in its top layer only;
the repository keeps the difference, one float16 array per changed parameter, in an
``.npz`` next to the linear adapter, and every path that builds the network (torch's
:class:`~retriever.embedder.FlagEncoder`, the ONNX export) adds it to the bundled
weights at load. The encoder's name carries the delta's digest, so embedding caches,
the catalog's Qdrant collection and the ONNX export made without it are never reused.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from retriever.errors import ModelNotFound

if TYPE_CHECKING:
    import torch


class AdapterError(ModelNotFound):
    """The adapter file is missing, unreadable, or made for another encoder."""


@dataclass(frozen=True)
class WeightDelta:
    tensors: dict[str, np.ndarray]  # parameter name -> float16 change
    base_model: str
    digest: str

    def apply(self, network: torch.nn.Module) -> None:
        """Add the changes to ``network``'s parameters, in place."""
        import torch

        params = dict(network.named_parameters())
        with torch.no_grad():
            for name, change in self.tensors.items():
                param = params.get(name)
                if param is None or tuple(param.shape) != change.shape:
                    raise AdapterError(
                        f"the fine-tuned layers change {name} {change.shape}, which "
                        f"{self.base_model} does not have in that shape"
                    )
                param.add_(torch.from_numpy(change.astype(np.float32)).to(param.dtype))


def encoder_name(model: Path, pooling: str, delta: WeightDelta | None) -> str:
    """A ``flag`` encoder's name (what caches and collections are keyed by); fine-tuned
    layers make another encoder."""
    name = f"flag:{model.name}:{pooling}"
    return f"{name}+ft-{delta.digest}" if delta is not None else name


def delta_from_arrays(arrays: dict[str, np.ndarray], base_model: str) -> WeightDelta:
    """The delta of these arrays (float16 each), its digest over names and values."""
    digest = hashlib.blake2b(digest_size=6)
    tensors = {}
    for name in sorted(arrays):
        value = np.ascontiguousarray(arrays[name], dtype=np.float16)
        digest.update(name.encode() + b"\0" + value.tobytes())
        tensors[name] = value
    return WeightDelta(tensors, base_model, digest.hexdigest())


def save_delta(arrays: dict[str, np.ndarray], base_model: str, out: Path) -> None:
    """The artifact :func:`retriever.adapter.load_adapter` reads as a :class:`WeightDelta`."""
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_suffix(".part.npz")
    halves = {f"delta/{name}": value.astype(np.float16) for name, value in arrays.items()}
    np.savez_compressed(partial, base_model=np.str_(base_model), **halves)  # type: ignore[arg-type]
    partial.replace(out)
