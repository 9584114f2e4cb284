"""``BGEM3Encoder`` (FlagEmbedding's BGE-M3 path, the GPU deployment's encoder) on the CPU,
with a model of BGE-M3's architecture that the test makes and saves itself: an
XLM-RoBERTa network two layers deep and 32 wide with random weights, and a tokenizer
over characters. Nothing is downloaded; the real model's weights only change the
numbers, not the code that loads, batches and indexes them."""

from __future__ import annotations

import string
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
from transformers import PreTrainedTokenizerFast, XLMRobertaConfig, XLMRobertaModel

from retriever.catalog import build_index, catalog_documents, load_index, open_catalog
from retriever.config import RetrieverConfig
from retriever.embedder import BGEM3Encoder, load_encoder
from retriever.errors import ModelNotFound
from tests.retriever.catalog import catalog_tools

WIDTH = 32
TEXTS = ["send a text message to my phone", "weather in Paris tomorrow", "book the 9:40 flight"]


@pytest.fixture(scope="module")
def tiny_m3(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A BGE-M3-shaped model folder (config.json, safetensors, tokenizer.json)."""
    folder = tmp_path_factory.mktemp("models") / "tiny-bge-m3"
    special = ["<s>", "<pad>", "</s>", "<unk>"]
    pieces = ["▁", *string.ascii_letters, *string.digits, *string.punctuation]
    vocab = [(t, 0.0) for t in special] + [(p, -1.0) for p in pieces] + [("<mask>", 0.0)]
    tokenizer = Tokenizer(models.Unigram(vocab, unk_id=3))
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.decoder = decoders.Metaspace()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", 0), ("</s>", 2)]
    )
    PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        pad_token="<pad>",
        mask_token="<mask>",
        cls_token="<s>",
        sep_token="</s>",
        model_max_length=510,
    ).save_pretrained(folder)
    torch.manual_seed(0)
    config = XLMRobertaConfig(
        vocab_size=len(vocab),
        hidden_size=WIDTH,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=514,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
    )
    XLMRobertaModel(config).save_pretrained(folder)
    return folder


def test_the_settings_load_it_in_fp32_on_the_cpu(tiny_m3: Path) -> None:
    config = RetrieverConfig(model_kind="bge-m3", model_path=tiny_m3, device="cpu")
    encoder = load_encoder(config)
    assert isinstance(encoder, BGEM3Encoder)
    assert not encoder.fp16
    assert (encoder.name, encoder.dim) == ("bge-m3:tiny-bge-m3", WIDTH)
    vectors = encoder.encode(TEXTS)
    assert vectors.shape == (3, WIDTH)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    assert encoder.encode([]).shape == (0, WIDTH)
    assert load_encoder(config) is encoder  # loaded once per process


def test_a_batch_gives_each_text_the_vector_it_gets_alone(tiny_m3: Path) -> None:
    encoder = BGEM3Encoder(tiny_m3, "cpu")
    batch = encoder.encode(TEXTS)  # padded to the longest text
    alone = np.stack([encoder.encode([text])[0] for text in TEXTS])
    np.testing.assert_allclose(batch, alone, atol=1e-5)
    assert not np.allclose(batch[0], batch[1], atol=1e-3)  # the texts are told apart
    assert encoder.counts.texts == 3 + 3


def test_fp16_switches_the_network_and_keeps_the_vectors(tiny_m3: Path) -> None:
    full = BGEM3Encoder(tiny_m3, "cpu")
    half = BGEM3Encoder(tiny_m3, "cpu", fp16=True)
    assert half.fp16
    assert next(half._model.model.parameters()).dtype == torch.float16
    assert next(full._model.model.parameters()).dtype == torch.float32
    halved = half.encode(TEXTS)
    assert halved.dtype == np.float32  # the index always gets float32 vectors
    cosines = (halved * full.encode(TEXTS)).sum(axis=1)
    assert cosines.min() > 0.99


def test_the_catalog_index_is_built_and_searched_with_it(tiny_m3: Path, tmp_path: Path) -> None:
    config = RetrieverConfig(model_kind="bge-m3", model_path=tiny_m3, device="cpu")
    encoder = load_encoder(config)
    tools = catalog_tools()
    catalog = open_catalog(encoder, config, tmp_path, None)
    try:
        report = build_index(tools, encoder, catalog, config, progress=False)
        assert (report.added, report.unchanged) == (len(tools), 0)
        again = build_index(tools, encoder, catalog, config, progress=False)
        assert (again.added, again.unchanged) == (0, len(tools))
        index = load_index(catalog, config)
    finally:
        catalog.close()
    assert catalog.collection == "tools-bge-m3-tiny-bge-m3"  # the model names the collection
    document = catalog_documents(tools, config)[4]
    query = encoder.encode([document.text])[0]
    hits = index.search(query, document.text, 3, method="dense")
    # The document's own text finds it at the top, at a cosine of 1 (its stored vector).
    assert hits[0].name == document.name
    assert hits[0].score == pytest.approx(1.0, abs=1e-3)


def test_without_the_gpu_extra_the_error_names_it(
    tiny_m3: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "FlagEmbedding", None)  # as if not installed
    with pytest.raises(ModelNotFound, match=r"pip install 'toolgraph\[gpu\]'"):
        BGEM3Encoder(tiny_m3, "cpu")
