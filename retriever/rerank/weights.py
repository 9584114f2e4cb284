"""The reranker's weights: the fine-tuned top layer as float16 deltas on the bundled
MiniLM and the token projection, in one ``.npz`` (``retriever/adapters/``)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from retriever.delta import AdapterError, WeightDelta, delta_from_arrays

#: Dimensions of a token vector after the projection.
DIM = 64

#: Tokens read of a query and of a tool's document.
MAX_QUERY_TOKENS = 32
MAX_TOOL_TOKENS = 96

#: The shipped file, trained by ``python -m retriever.finetune.late``.
BUNDLED = Path(__file__).resolve().parent.parent / "adapters" / "minilm-l6-v2-rerank.npz"


@dataclass(frozen=True)
class RerankWeights:
    delta: WeightDelta
    projection: np.ndarray  # float32 [DIM, hidden]
    digest: str


def save_weights(deltas: dict[str, np.ndarray], projection: np.ndarray, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_suffix(".part.npz")
    halves = {f"delta/{name}": value.astype(np.float16) for name, value in deltas.items()}
    np.savez_compressed(partial, projection=projection.astype(np.float32), **halves)  # type: ignore[arg-type]
    partial.replace(out)


def load_weights(path: Path | None = None) -> RerankWeights:
    """The reranker's file (the bundled one by default); ``AdapterError`` when it is missing
    or not a reranker's."""
    path = path or BUNDLED
    try:
        with np.load(path) as data:
            arrays = {key: data[key] for key in data.files}
    except (OSError, ValueError) as exc:
        raise AdapterError(f"cannot read the reranker's weights {path}: {exc}") from exc
    projection = arrays.pop("projection", None)
    if projection is None or projection.ndim != 2 or projection.shape[0] != DIM:
        raise AdapterError(f"{path} is not a reranker's weights (no {DIM}-row projection)")
    deltas = {key.removeprefix("delta/"): value for key, value in arrays.items()}
    delta = delta_from_arrays(deltas, "all-MiniLM-L6-v2")
    digest = hashlib.blake2b(delta.digest.encode() + projection.tobytes(), digest_size=6)
    return RerankWeights(delta, projection.astype(np.float32), digest.hexdigest())
