"""Fine-tuned layers shipped as float16 deltas: torch and the ONNX export build the same
changed network, under a name of their own, and a delta for another network is refused;
training the top layer on cached states lowers the loss, deterministically."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from retriever.adapter import FINETUNED_LAYERS, load_adapter
from retriever.config import RetrieverConfig
from retriever.delta import AdapterError, WeightDelta, save_delta
from retriever.embedder import bundled_model_path, load_encoder
from retriever.finetune.data import TrainingSet
from retriever.finetune.layers import LayerSettings, StatedSet, train_top_layers
from retriever.finetune.states import LowerLayers, States, encode_states

TEXTS = ["book a table for two tonight", "Weather (forecast)\nThe forecast for a city."]
TOP = "encoder.layer.5"


def _delta(tmp_path: Path, scale: float = 0.05) -> Path:
    rng = np.random.default_rng(0)
    arrays = {
        f"{TOP}.output.dense.weight": scale * rng.normal(size=(384, 1536)),
        f"{TOP}.output.dense.bias": scale * rng.normal(size=384),
    }
    path = tmp_path / "delta.npz"
    save_delta({k: v.astype(np.float16) for k, v in arrays.items()}, "flag:model:mean", path)
    return path


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.asarray((a * b).sum(axis=1))


def test_a_delta_changes_the_network_the_same_in_torch_and_onnx(tmp_path: Path) -> None:
    path = _delta(tmp_path)
    delta = load_adapter(path)
    assert isinstance(delta, WeightDelta)
    torch_tuned = load_encoder(RetrieverConfig(device="cpu", runtime="torch", adapter_path=path))
    onnx_tuned = load_encoder(
        RetrieverConfig(
            device="cpu",
            runtime="onnx",
            adapter_path=path,
            onnx_dir=tmp_path,
            onnx_query_precision="fp32",  # the fp32 graph's fidelity is what is checked
        )
    )
    bare = load_encoder(RetrieverConfig(device="cpu", runtime="torch", adapter=False))
    assert torch_tuned.name == onnx_tuned.name == f"{bare.name}+ft-{delta.digest}"
    assert _cosines(torch_tuned.encode(TEXTS), onnx_tuned.encode(TEXTS)).min() >= 0.9999
    assert _cosines(torch_tuned.encode(TEXTS), bare.encode(TEXTS)).max() < 0.999
    # The export is keyed by the delta: the bare model's export is another file.
    assert [p.name for p in tmp_path.glob("*.onnx")] == [
        p.name for p in tmp_path.glob(f"model-ft-{delta.digest}-mean-fp32-*.onnx")
    ]


def test_a_delta_for_another_network_is_refused(tmp_path: Path) -> None:
    wrong = tmp_path / "wrong.npz"
    save_delta({f"{TOP}.output.dense.bias": np.zeros(768, np.float16)}, "flag:model:mean", wrong)
    with pytest.raises(AdapterError, match=r"change encoder\.layer\.5\.output\.dense\.bias"):
        load_encoder(RetrieverConfig(device="cpu", runtime="torch", adapter_path=wrong))
    other = tmp_path / "other.npz"
    save_delta({f"{TOP}.output.dense.bias": np.zeros(384, np.float16)}, "flag:bge:cls", other)
    with pytest.raises(AdapterError, match="trained on flag:bge:cls"):
        load_encoder(RetrieverConfig(device="cpu", runtime="torch", adapter_path=other))


def test_the_shipped_fine_tuned_layers_fit_the_bundled_model() -> None:
    delta = load_adapter(FINETUNED_LAYERS)
    assert isinstance(delta, WeightDelta)
    assert delta.base_model == "flag:model:mean"
    assert {name.rsplit(".", 2)[0].split(".attention")[0] for name in delta.tensors} <= {
        TOP,
        f"{TOP}.intermediate",
        f"{TOP}.output",
    }
    assert FINETUNED_LAYERS.stat().st_size < 5_000_000


def test_the_lower_layers_and_the_top_give_the_encoders_vectors() -> None:
    lower = LowerLayers(bundled_model_path(), trained=1, threads=1)
    vectors = encode_states(lower.top, lower.states(TEXTS))
    bare = load_encoder(RetrieverConfig(device="cpu", runtime="torch", adapter=False))
    assert _cosines(vectors, bare.encode(TEXTS)).min() >= 0.9999


def _toy(lower: LowerLayers) -> StatedSet:
    """Tools whose states differ a little from each other, and queries that are their
    tool's states under more noise than that difference: the bare layer barely tells
    them apart."""
    rng = np.random.default_rng(0)
    common = rng.normal(size=(6, 384))
    tools = np.concatenate([common + 0.15 * rng.normal(size=(6, 384)) for _ in range(8)])
    queries = np.concatenate([tools[6 * t : 6 * t + 6] for t in range(8) for _ in range(3)])
    queries = queries + 0.3 * rng.normal(size=queries.shape)
    data = TrainingSet(
        name="toy",
        doc_ids=[f"t{t}" for t in range(8)],
        doc_texts=[f"tool {t}" for t in range(8)],
        doc_keys=[f"t{t}" for t in range(8)],
        query_ids=[f"q{i}" for i in range(24)],
        query_texts=[f"query {i}" for i in range(24)],
        positives=[[i // 3] for i in range(24)],
        negatives=[[(i // 3 + 1) % 8] for i in range(24)],
    )

    def states(array: np.ndarray) -> States:
        return States(array.astype(np.float16), np.arange(0, len(array) + 1, 6))

    return StatedSet(data, states(queries), states(tools))


def test_training_the_top_layer_lowers_the_loss_and_is_seeded() -> None:
    lower = LowerLayers(bundled_model_path(), trained=1, threads=1)
    toy = _toy(lower)
    settings = LayerSettings(steps=30, batch_size=8, learning_rate=1e-3)
    first = train_top_layers(lower.top, [TOP], [toy], settings, progress=False)
    assert np.mean(first.losses[-5:]) < 0.7 * np.mean(first.losses[:5])
    again = train_top_layers(lower.top, [TOP], [toy], settings, progress=False)
    assert first.deltas.keys() == again.deltas.keys()
    assert all(np.array_equal(first.deltas[k], again.deltas[k]) for k in first.deltas)
    assert all(name.startswith(f"{TOP}.") for name in first.deltas)
    assert all(value.dtype == np.float16 for value in first.deltas.values())
