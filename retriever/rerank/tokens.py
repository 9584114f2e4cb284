"""The reranker's network on onnxruntime: tokens in, one normalised vector per token out.

The graph is the bundled MiniLM with the reranker's fine-tuned top layer added
(:class:`~retriever.delta.WeightDelta`) and its projection to
:data:`~retriever.rerank.weights.DIM` dimensions, exported once from the local weights
like the encoder's (:mod:`retriever._onnx_export`: eager attention, onnxruntime's BERT
fusions, int8 matrix products per channel) and kept in ``onnx_dir`` under a name keyed
by the weights' digest, the precision and onnxruntime's release.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from retriever._onnx_export import Precision, _convert, _optimize, pooled, trace_graph
from retriever.errors import ModelExportFailed
from retriever.onnx_encoder import _pad_token, _session
from retriever.rerank.weights import DIM, RerankWeights

if TYPE_CHECKING:
    import onnxruntime
    import torch

TokenVectors = np.ndarray  # float32 [tokens, DIM], each row of norm 1


def token_file(model: Path, weights: RerankWeights, precision: Precision, folder: Path) -> Path:
    import onnxruntime

    digest = hashlib.blake2b(digest_size=8)
    for part in ("rerank-1", onnxruntime.__version__, precision, weights.digest):
        digest.update(part.encode() + b"\0")
    digest.update((model / "config.json").read_bytes())
    return folder / f"{model.name}-rerank-{weights.digest}-{precision}-{digest.hexdigest()}.onnx"


class TokenEncoder:
    """Token vectors of texts, one onnxruntime pass per call (serialised)."""

    def __init__(
        self,
        model: Path,
        weights: RerankWeights,
        folder: Path,
        *,
        precision: Precision = "int8",
        threads: int = 1,
    ) -> None:
        from tokenizers import Tokenizer

        self.file = token_file(model, weights, precision, folder)
        self._tokenizer = Tokenizer.from_file(str(model / "tokenizer.json"))
        pad = _pad_token(model)
        self._tokenizer.enable_padding(pad_id=self._tokenizer.token_to_id(pad) or 0, pad_token=pad)
        self._lock = threading.Lock()
        if not self.file.is_file():
            try:
                export_tokens(model, weights, precision, self.file)
            except (ImportError, OSError, RuntimeError, ValueError, KeyError) as exc:
                raise ModelExportFailed(
                    f"could not export the reranker to {self.file}: {exc}"
                ) from exc
        self._session: onnxruntime.InferenceSession = _session(self.file, threads)
        self._inputs = [i.name for i in self._session.get_inputs()]

    def encode(self, texts: list[str], max_tokens: int) -> list[TokenVectors]:
        """Each text's token vectors, the text cut at ``max_tokens`` tokens."""
        if not texts:
            return []
        self._tokenizer.enable_truncation(max_length=max_tokens)
        with self._lock:
            encodings = self._tokenizer.encode_batch(texts)
            feeds = {
                "input_ids": np.asarray([e.ids for e in encodings], dtype=np.int64),
                "attention_mask": np.asarray([e.attention_mask for e in encodings], np.int64),
                "token_type_ids": np.asarray([e.type_ids for e in encodings], dtype=np.int64),
            }
            (out,) = self._session.run(None, {name: feeds[name] for name in self._inputs})
        lengths = feeds["attention_mask"].sum(axis=1)
        return [
            np.ascontiguousarray(row[:n], dtype=np.float32)
            for row, n in zip(out, lengths, strict=False)
        ]


def export_tokens(model: Path, weights: RerankWeights, precision: Precision, target: Path) -> None:
    """Write the reranker's graph to ``target`` (atomically, as the encoder's export)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".export-") as folder:
        traced = Path(folder) / "traced.onnx"
        _trace(model, weights, traced)
        optimized = Path(folder) / "optimized.onnx"
        _optimize(traced, optimized, model)
        final = Path(folder) / "final.onnx"
        _convert(optimized, final, precision)
        os.replace(final, target)


def _trace(model: Path, weights: RerankWeights, out: Path) -> None:
    import torch
    from transformers import AutoModel

    network = AutoModel.from_pretrained(str(model), attn_implementation="eager").eval()
    weights.delta.apply(network)
    hidden = int(json.loads((model / "config.json").read_text())["hidden_size"])
    projection = torch.nn.Linear(hidden, DIM, bias=False)
    with torch.no_grad():
        projection.weight.copy_(torch.from_numpy(weights.projection))
    tokens = _tokens_graph(pooled(network, None), projection)
    trace_graph(tokens, model, out, "tokens", {0: "batch", 1: "tokens"})


def _tokens_graph(hidden: torch.nn.Module, projection: torch.nn.Module) -> torch.nn.Module:
    """``hidden`` (the network's last hidden states) projected, each token's vector
    normalised."""
    import torch

    class Tokens(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.hidden = hidden
            self.projection = projection

        def forward(
            self,
            input_ids: torch.Tensor,
            attention_mask: torch.Tensor,
            token_type_ids: torch.Tensor,
        ) -> torch.Tensor:
            states = self.hidden(input_ids, attention_mask, token_type_ids)
            return torch.nn.functional.normalize(self.projection(states), dim=-1)

    return Tokens()
