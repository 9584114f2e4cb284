"""The ONNX Runtime path of the bundled MiniLM against torch's, and what happens when the
exported file is missing, corrupt, or cannot be written."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from retriever.config import RetrieverConfig
from retriever.embedder import (
    FlagEncoder,
    bundled_model_path,
    load_encoder,
    nvidia_driver_present,
)
from retriever.errors import ModelExportFailed, ModelNotFound
from retriever.onnx_encoder import OnnxEncoder, onnx_file

#: Cosine to torch's vector that the fp32 export must reach on every text.
FP32_TOLERANCE = 0.9999

TEXTS = [
    "weather forecast for a city",
    "what will the weather be tomorrow in Paris",
    "x",
    "Ünïcödé — naïve café résumé 東京 🚀",
    "getLatestNBAScores team_id season_year",
    # Longer than the 256 tokens both paths cut at.
    "convert an amount of money between two currencies at today's rate " * 30,
]


@pytest.fixture(scope="module")
def torch_encoder() -> FlagEncoder:
    return FlagEncoder(bundled_model_path(), "cpu", "mean")


@pytest.fixture(scope="module")
def onnx_encoder(onnx_dir: Path) -> OnnxEncoder:
    return OnnxEncoder(bundled_model_path(), "mean", "fp32", onnx_dir)


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.asarray((a * b).sum(axis=1))


def test_the_fp32_export_gives_torchs_vectors(
    onnx_encoder: OnnxEncoder, torch_encoder: FlagEncoder
) -> None:
    together = onnx_encoder.encode(TEXTS)
    alone = np.concatenate([onnx_encoder.encode([text]) for text in TEXTS])
    expected = torch_encoder.encode(TEXTS)
    assert together.dtype == np.float32
    assert together.shape == expected.shape
    assert cosines(together, expected).min() >= FP32_TOLERANCE
    assert cosines(alone, expected).min() >= FP32_TOLERANCE
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)


def test_the_fp32_export_keeps_the_torch_encoders_name(
    onnx_encoder: OnnxEncoder, torch_encoder: FlagEncoder
) -> None:
    # The embeddings cache, the Qdrant collection and the adapter are keyed by it.
    assert onnx_encoder.name == torch_encoder.name
    assert onnx_encoder.dim == torch_encoder.dim == 384


def test_short_texts_run_the_query_graph_and_long_ones_the_fp32_one(
    onnx_encoder: OnnxEncoder, onnx_dir: Path
) -> None:
    both = OnnxEncoder(bundled_model_path(), "mean", "fp32", onnx_dir, query_precision="int8")
    together = both.encode(TEXTS)
    exact = onnx_encoder.encode(TEXTS)
    long = TEXTS.index(max(TEXTS, key=len))  # past QUERY_TOKENS: the fp32 graph
    assert np.allclose(together[long], exact[long], atol=1e-5)
    short = [i for i in range(len(TEXTS)) if i != long]
    assert not np.allclose(together[short], exact[short], atol=1e-4)  # the int8 graph answered
    assert cosines(together, exact).min() >= 0.97
    # A text's vector is its own, whatever else its pass held.
    alone = np.concatenate([both.encode([text]) for text in TEXTS])
    assert np.allclose(together, alone, atol=1e-6)
    # One name, one cache: the two graphs' vectors are meant to be compared.
    assert both.name == onnx_encoder.name
    assert both.query_file == onnx_file(bundled_model_path(), "mean", "int8", onnx_dir)


def test_the_default_encoder_runs_short_passes_on_int8(onnx_dir: Path) -> None:
    encoder = load_encoder(RetrieverConfig(device="cpu", adapter=False))
    assert isinstance(encoder, OnnxEncoder)
    assert encoder.query_file is not None
    assert encoder.query_file.is_file()


def test_the_default_cpu_encoder_runs_on_onnx(onnx_dir: Path) -> None:
    encoder = load_encoder(RetrieverConfig(device="cpu", adapter=False))
    assert isinstance(encoder, OnnxEncoder)
    assert onnx_file(bundled_model_path(), "mean", "fp32", onnx_dir).is_file()


def test_the_default_encoder_loads_without_torch_where_no_nvidia_driver_is(
    onnx_dir: Path,
) -> None:
    """A fresh process, as a server's start-up: on CPU, torch is never imported (its import
    was most of the model's load)."""
    program = (
        "import sys\n"
        "from pathlib import Path\n"
        "from retriever.config import RetrieverConfig\n"
        "from retriever.embedder import load_encoder\n"
        f"encoder = load_encoder(RetrieverConfig(onnx_dir=Path({str(onnx_dir)!r})))\n"
        "encoder.encode(['hello'])\n"
        "print(type(encoder.base).__name__, 'torch' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=600, check=True
    )
    torch_imported = "True" if nvidia_driver_present() else "False"
    assert done.stdout.split() == ["OnnxEncoder", torch_imported]


def test_a_corrupt_export_is_exported_again(
    onnx_encoder: OnnxEncoder, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    kept = onnx_file(bundled_model_path(), "mean", "fp32", tmp_path)
    kept.write_bytes(onnx_encoder.file.read_bytes()[:4096])
    encoder = OnnxEncoder(bundled_model_path(), "mean", "fp32", tmp_path)
    assert "exporting it again" in caplog.text
    assert kept.stat().st_size == onnx_encoder.file.stat().st_size
    assert np.allclose(encoder.encode(TEXTS[:2]), onnx_encoder.encode(TEXTS[:2]), atol=1e-5)


def test_an_export_that_cannot_be_written_is_a_clear_error(tmp_path: Path) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    with pytest.raises(ModelExportFailed, match=r"could not export .*retriever\.runtime: torch"):
        OnnxEncoder(bundled_model_path(), "mean", "fp32", blocked / "onnx")


def test_a_folder_that_is_not_this_models_export_is_not_used(
    onnx_encoder: OnnxEncoder, tmp_path: Path
) -> None:
    model = tmp_path / "model"
    shutil.copytree(bundled_model_path(), model)
    first = onnx_file(model, "mean", "fp32", tmp_path)
    (model / "model.safetensors").touch()  # new weights: a new file name, never the old one
    assert onnx_file(model, "mean", "fp32", tmp_path) != first
    assert onnx_file(model, "cls", "fp32", tmp_path) != first
    assert onnx_file(model, "mean", "int8", tmp_path) != first


def test_without_onnxruntime_auto_falls_back_to_torch_and_onnx_refuses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # what a missing package raises
    # fp16 keys an encoder no other test loads, so this one is not a cached copy.
    fallback = load_encoder(RetrieverConfig(device="cpu", adapter=False, onnx_precision="fp16"))
    assert isinstance(fallback, FlagEncoder)
    with pytest.raises(ModelNotFound, match="onnxruntime is not installed"):
        load_encoder(RetrieverConfig(device="cuda", runtime="onnx", adapter=False))
