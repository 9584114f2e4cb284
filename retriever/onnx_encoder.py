"""The CPU path of a ``flag`` encoder: the same network on onnxruntime, no torch per query.

torch on one thread spent about 25 ms on an idle core for a one-query pass of the
bundled MiniLM, most of it in per-module Python and dispatch; the exported graph runs
in a single ``run`` call (retriever/README.md, "Latency", has the figures). The
tokenizer is the model's own ``tokenizer.json`` through ``tokenizers`` (the library
transformers' fast tokenizer wraps), set to cut at :data:`MAX_TOKENS` and pad to the
longest text as :class:`~retriever.embedder.FlagEncoder` asks it to.

The graph is exported from the weights on first use and kept in ``onnx_dir`` under a
name that changes with the weights, the pooling, the precision and onnxruntime's
release, and with the fine-tuned layers' digest where a
:class:`~retriever.delta.WeightDelta` is applied before the export (:func:`onnx_file`). A
file that onnxruntime cannot load, or that answers in the wrong shape, is exported again
once; a second failure is :class:`ModelExportFailed`.

``fp32`` gives the torch vectors to a cosine of 0.99999 or better and keeps the torch
encoder's :attr:`name`, so the embeddings cache, the catalog's Qdrant collection and
the adapter, all keyed by that name, stay valid. ``fp16`` and ``int8`` are measured
alternatives (cosine to torch about 0.9997 and 0.985) and are named apart, so their
vectors never mix with the others in a cache.

A second graph may serve the short texts (``query_precision``): every text of at most
:data:`QUERY_TOKENS` tokens (a request's question and sub-tasks, and the shorter tool
documents) runs the int8 graph, one text a run, in 0.44x of fp32's time on an idle core;
longer texts run the fp32 graph in passes. One text a run, because int8's activation
scales are taken over the whole pass: a text beside others would come out a little
different from the same text alone. So a text's vector depends on the text alone, never
on its neighbours, the pass size or the load. The two graphs are near enough to share
fp32's name and cache: int8 queries against fp32 documents scored NDCG@5 within 0.5 of
fp32 queries on the training sets (``python -m eval.query_precision``,
eval/results/query_precision.json).
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from retriever._onnx_export import INPUTS, Precision, export_onnx
from retriever.delta import WeightDelta, encoder_name
from retriever.encoder import EncodeCounts, Vectors
from retriever.errors import ModelExportFailed

if TYPE_CHECKING:
    import onnxruntime

log = logging.getLogger(__name__)

#: Longest input, in tokens (as :data:`retriever.embedder.MAX_TOKENS`).
MAX_TOKENS = 256

#: Longest text, in tokens, that the query graph runs (a question; 99 % of
#: toolbench_stable's requests are shorter).
QUERY_TOKENS = 128

#: Bumped when the export itself changes, so old files are not reused.
_EXPORT_FORMAT = "1"

_WEIGHT_SUFFIXES = (".safetensors", ".bin")


def onnx_file(
    model: Path,
    pooling: str,
    precision: Precision,
    folder: Path,
    delta: WeightDelta | None = None,
) -> Path:
    """Where the export of ``model`` (with ``delta`` applied) with this pooling and
    precision is kept."""
    import onnxruntime

    digest = hashlib.blake2b(digest_size=8)
    # The bundled weights alone keep the name they had before deltas existed.
    tuned = () if delta is None else (f"ft-{delta.digest}",)
    for part in (_EXPORT_FORMAT, onnxruntime.__version__, pooling, precision, *tuned):
        digest.update(part.encode() + b"\0")
    digest.update((model / "config.json").read_bytes())
    for weights in sorted(p for p in model.iterdir() if p.suffix in _WEIGHT_SUFFIXES):
        stat = weights.stat()
        digest.update(f"{weights.name}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    name = model.name if delta is None else f"{model.name}-ft-{delta.digest}"
    return folder / f"{name}-{pooling}-{precision}-{digest.hexdigest()}.onnx"


class OnnxEncoder:
    """A ``flag`` encoder served by onnxruntime; one pass at a time, as the torch one."""

    def __init__(
        self,
        model: Path,
        pooling: str,
        precision: Precision,
        folder: Path,
        *,
        threads: int = 1,
        delta: WeightDelta | None = None,
        query_precision: Precision | None = None,
    ) -> None:
        from tokenizers import Tokenizer

        self.file = onnx_file(model, pooling, precision, folder, delta)
        self._delta = delta
        self._tokenizer = Tokenizer.from_file(str(model / "tokenizer.json"))
        self._tokenizer.enable_truncation(max_length=MAX_TOKENS)
        pad = _pad_token(model)
        self._tokenizer.enable_padding(pad_id=self._tokenizer.token_to_id(pad) or 0, pad_token=pad)
        self._dim = int(json.loads((model / "config.json").read_text())["hidden_size"])
        torch_name = encoder_name(model, pooling, delta)
        self._name = torch_name if precision == "fp32" else f"{torch_name}:onnx-{precision}"
        self._lock = threading.Lock()
        #: Public so that tests and benchmarks can see what was embedded (the probe of
        #: the export at load is not counted).
        self.counts = EncodeCounts()
        self._session = self._open(self.file, model, pooling, precision, threads)
        self._inputs = [i.name for i in self._session.get_inputs()]
        #: The graph of short passes, where it differs from the bulk one.
        self.query_file: Path | None = None
        self._query_session: onnxruntime.InferenceSession | None = None
        if query_precision is not None and query_precision != precision:
            self.query_file = onnx_file(model, pooling, query_precision, folder, delta)
            self._query_session = self._open(
                self.query_file, model, pooling, query_precision, threads
            )

    @property
    def name(self) -> str:
        return self._name

    @property
    def dim(self) -> int:
        return self._dim

    def encode(self, texts: list[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        with self._lock:
            if self._query_session is None:
                return self._counted(self._session, texts)
            short = self._short(texts)
            rows = np.zeros((len(texts), self._dim), dtype=np.float32)
            for i in short:
                rows[i] = self._counted(self._query_session, [texts[i]])[0]
            long = sorted(set(range(len(texts))) - set(short))
            if long:
                rows[long] = self._counted(self._session, [texts[i] for i in long])
            return rows

    def _short(self, texts: list[str]) -> list[int]:
        """The rows of ``texts`` the query graph runs."""
        lengths = (sum(e.attention_mask) for e in self._tokenizer.encode_batch(texts))
        return [i for i, n in enumerate(lengths) if n <= QUERY_TOKENS]

    def _counted(self, session: onnxruntime.InferenceSession, texts: list[str]) -> Vectors:
        vectors, tokens = self._run(session, texts)
        self.counts.add(len(texts), tokens)
        return vectors

    def _run(self, session: onnxruntime.InferenceSession, texts: list[str]) -> tuple[Vectors, int]:
        """The vectors, and the token positions the pass computed."""
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.asarray([e.ids for e in encodings], dtype=np.int64)
        feeds: dict[str, npt.NDArray[np.int64]] = {
            "input_ids": ids,
            "attention_mask": np.asarray([e.attention_mask for e in encodings], dtype=np.int64),
            "token_type_ids": np.asarray([e.type_ids for e in encodings], dtype=np.int64),
        }
        (vectors,) = session.run(None, {name: feeds[name] for name in self._inputs})
        out: Vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        return out, int(ids.size)

    def _open(
        self, file: Path, model: Path, pooling: str, precision: Precision, threads: int
    ) -> onnxruntime.InferenceSession:
        """The session over the kept ``file``, exported first when it is absent, and
        exported again once when it does not load or does not answer as this model would."""
        if not file.is_file():
            self._export(file, model, pooling, precision)
        try:
            return self._checked_session(file, threads)
        except ModelExportFailed as exc:
            log.warning("%s; exporting it again from %s", exc, model)
        self._export(file, model, pooling, precision)
        return self._checked_session(file, threads)

    def _export(self, file: Path, model: Path, pooling: str, precision: Precision) -> None:
        log.info("exporting %s to ONNX (%s) at %s", model.name, precision, file)
        try:
            export_onnx(model, pooling, precision, file, self._delta)
        except (ImportError, OSError, RuntimeError, ValueError, KeyError) as exc:
            raise ModelExportFailed(
                f"could not export {model} to ONNX at {file}: {exc}; "
                "set retriever.runtime: torch to embed with torch instead"
            ) from exc

    def _checked_session(self, file: Path, threads: int) -> onnxruntime.InferenceSession:
        session = _session(file, threads)
        names = [i.name for i in session.get_inputs()]
        if not names or any(name not in INPUTS for name in names):
            raise ModelExportFailed(f"{file} takes {names}, not a tokenized text")
        self._inputs = names
        probe, _ = self._run(session, ["probe"])
        if probe.shape != (1, self._dim) or not np.isfinite(probe).all():
            raise ModelExportFailed(f"{file} answers {probe.shape}, not (1, {self._dim})")
        return session


def _session(file: Path, threads: int) -> onnxruntime.InferenceSession:
    import onnxruntime
    from onnxruntime.capi import onnxruntime_pybind11_state as state

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    # Idle pool threads spin by default: CPU taken from the event loop between queries.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    try:
        return onnxruntime.InferenceSession(str(file), options, providers=["CPUExecutionProvider"])
    except (
        state.Fail,
        state.InvalidArgument,
        state.InvalidGraph,
        state.InvalidProtobuf,
        state.NoSuchFile,
    ) as exc:
        raise ModelExportFailed(f"onnxruntime cannot load {file}: {exc}") from exc


def _pad_token(model: Path) -> str:
    path = model / "special_tokens_map.json"
    token = json.loads(path.read_text()).get("pad_token", "[PAD]") if path.is_file() else "[PAD]"
    return str(token.get("content", "[PAD]") if isinstance(token, dict) else token)
