"""The frozen lower layers of the encoder, run once per text and kept.

Fine-tuning only the top layer(s) of the bundled MiniLM leaves everything under them
unchanged, so each text's hidden states below the trained layers are computed once
(the costly part: five of six layers over up to 256 tokens), cached on disk as
float16, and every training step and every evaluation afterwards runs the top layers
alone from them. The network's own pass (the same tokenizer, the same truncation at
:data:`~retriever.embedder.MAX_TOKENS`), the lower layers exported once to
onnxruntime (about 1.6x torch's speed on these cores, the same states to float
rounding).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from tqdm import tqdm

from retriever._onnx_export import INPUTS, pooled
from retriever.embedder import MAX_TOKENS, Vectors

if TYPE_CHECKING:
    import torch


@dataclass
class States:
    """Hidden states of many texts under the trained layers, ragged: text ``i`` is
    ``tokens[offsets[i]:offsets[i + 1]]``."""

    tokens: np.ndarray  # float16 [all tokens, dim]
    offsets: np.ndarray  # int64 [texts + 1]

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def batch(self, rows: list[int], max_tokens: int = MAX_TOKENS) -> tuple[torch.Tensor, ...]:
        """Rows padded to the longest (cut at ``max_tokens``): states and the 0/1 mask."""
        import torch

        lengths = [min(max_tokens, int(self.offsets[r + 1] - self.offsets[r])) for r in rows]
        width = max(lengths)
        out = np.zeros((len(rows), width, self.tokens.shape[1]), dtype=np.float32)
        mask = np.zeros((len(rows), width), dtype=np.float32)
        for i, (row, length) in enumerate(zip(rows, lengths, strict=True)):
            start = int(self.offsets[row])
            out[i, :length] = self.tokens[start : start + length]
            mask[i, :length] = 1.0
        return torch.from_numpy(out), torch.from_numpy(mask)


class LowerLayers:
    """The bundled encoder cut below its top ``trained`` layers, on CPU."""

    def __init__(self, model: Path, trained: int, threads: int = 2) -> None:
        import torch
        from transformers import AutoModel, AutoTokenizer

        torch.set_num_threads(threads)
        self.model = model
        self.trained = trained
        self.tokenizer = AutoTokenizer.from_pretrained(str(model))
        network = AutoModel.from_pretrained(str(model), attn_implementation="eager").eval()
        layers = network.encoder.layer
        kept = range(len(layers) - trained, len(layers))
        self.top = [layers[i] for i in kept]
        self.top_names = [f"encoder.layer.{i}" for i in kept]  # as the network names them
        network.encoder.layer = torch.nn.ModuleList(list(layers)[: len(layers) - trained])
        self.network = network
        self.threads = threads
        self._session: object | None = None

    def _run(self, batch: dict[str, torch.Tensor]) -> np.ndarray:
        """The lower layers' last states for one tokenized batch, on onnxruntime."""
        import onnxruntime

        if self._session is None:
            self._session = onnxruntime.InferenceSession(
                str(self._export()), _options(self.threads), providers=["CPUExecutionProvider"]
            )
        feeds = {name: batch[name].numpy() for name in ("input_ids", "attention_mask")}
        feeds["token_type_ids"] = np.zeros_like(feeds["input_ids"])
        (hidden,) = self._session.run(None, feeds)  # type: ignore[union-attr]
        return np.asarray(hidden)

    def _export(self) -> Path:
        import tempfile
        import warnings

        import torch

        out = Path(tempfile.mkdtemp(prefix="lower-layers-")) / "lower.onnx"
        sample = self.tokenizer(["a text", "a longer text than that"], padding=True)
        args = tuple(torch.tensor(sample[name]) for name in INPUTS)
        axes = {name: {0: "batch", 1: "tokens"} for name in INPUTS}
        with torch.inference_mode(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                pooled(self.network, None),
                args,
                str(out),
                input_names=list(INPUTS),
                output_names=["hidden"],
                dynamic_axes={**axes, "hidden": {0: "batch", 1: "tokens"}},
                opset_version=17,
                dynamo=False,
            )
        return out

    def states(
        self,
        texts: list[str],
        *,
        batch_size: int = 32,
        label: str = "",
        max_tokens: int = MAX_TOKENS,
    ) -> States:
        """Each text's hidden states under the top layers (sorted by length to batch), the
        text cut at ``max_tokens``."""
        import torch

        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        pieces: list[np.ndarray] = [np.zeros((0, 0), dtype=np.float16)] * len(texts)
        batches = range(0, len(order), batch_size)
        with torch.inference_mode():
            for start in tqdm(batches, desc=label or "lower layers", mininterval=10):
                rows = order[start : start + batch_size]
                batch = self.tokenizer(
                    [texts[i] for i in rows],
                    padding=True,
                    truncation=True,
                    max_length=max_tokens,
                    return_tensors="pt",
                )
                hidden = self._run(batch)
                for row, states, mask in zip(rows, hidden, batch["attention_mask"], strict=True):
                    pieces[row] = states[: int(mask.sum())].astype(np.float16)
        lengths = np.asarray([len(p) for p in pieces], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        dim = int(self.network.config.hidden_size)
        tokens = np.concatenate(pieces) if texts else np.zeros((0, dim), dtype=np.float16)
        return States(tokens, offsets)

    def chunked_states(
        self, texts: list[str], cache_dir: Path, label: str, chunk: int = 1024
    ) -> States:
        """:meth:`cached_states` a chunk at a time, so an interrupted run keeps its work."""
        parts = [
            self.cached_states(texts[i : i + chunk], cache_dir, f"{label} {i // chunk + 1}")
            for i in range(0, len(texts), chunk)
        ]
        offsets = [parts[0].offsets]
        for part in parts[1:]:
            offsets.append(part.offsets[1:] + offsets[-1][-1])
        return States(np.concatenate([p.tokens for p in parts]), np.concatenate(offsets))

    def cached_states(
        self, texts: list[str], cache_dir: Path, label: str, max_tokens: int = MAX_TOKENS
    ) -> States:
        """:meth:`states`, kept under ``cache_dir`` by the texts and the cut."""
        digest = hashlib.blake2b(digest_size=10)
        for part in (self.model.name, str(self.trained), str(max_tokens), *texts):
            digest.update(part.encode() + b"\0")
        path = cache_dir / f"states-{digest.hexdigest()}.npz"
        if path.is_file():
            with np.load(path) as data:
                return States(data["tokens"], data["offsets"])
        states = self.states(texts, label=label, max_tokens=max_tokens)
        cache_dir.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".part.npz")
        np.savez(partial, tokens=states.tokens, offsets=states.offsets)
        partial.replace(path)
        return states


def _options(threads: int) -> object:
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    return options


def run_top(
    layers: list[torch.nn.Module], states: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """``layers`` over the states, mean-pooled over the mask and normalised."""
    import torch

    additive = (1.0 - mask)[:, None, None, :] * torch.finfo(torch.float32).min
    hidden = states
    for layer in layers:
        hidden = layer(hidden, additive)
    weights = mask.unsqueeze(-1)
    pooled = (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)
    return torch.nn.functional.normalize(pooled, dim=-1)


def encode_states(layers: list[torch.nn.Module], states: States, batch_size: int = 64) -> Vectors:
    """Vectors of every text of ``states`` through ``layers`` (no gradient)."""
    import torch

    lengths = np.diff(states.offsets)
    order = np.argsort(lengths, kind="stable")
    out = np.zeros((len(states), int(states.tokens.shape[1])), dtype=np.float32)
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            rows = [int(r) for r in order[start : start + batch_size]]
            hidden, mask = states.batch(rows)
            out[rows] = run_top(layers, hidden, mask).numpy()
    return out
