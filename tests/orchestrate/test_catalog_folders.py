"""Each worker's Qdrant folder: a worker that finds the first folder held claims the
next one, and fills it from the embeddings cache instead of embedding the catalog."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from qdrant_client import QdrantClient

from proxy.catalog.service import CatalogService
from proxy.config import load_settings
from proxy.encoder.service import EncoderService
from proxy.tools.packs.math.catalog import builtin_tools
from retriever.adapter import AdaptedEncoder
from retriever.bulk import DiskCache, embed_documents, text_key
from retriever.catalog import catalog_documents
from retriever.qdrant_store import claim_local_folder, collection_name


async def test_a_second_worker_fills_its_own_folder_from_the_embeddings_cache(
    tmp_path: Path,
) -> None:
    settings = load_settings(data_dir=tmp_path, planner={"memory_k": 0})
    encoders = EncoderService(settings.retriever)
    encoder = await encoders.encoder()
    first = claim_local_folder(tmp_path)  # another worker holds `qdrant`
    base = encoder.base if isinstance(encoder, AdaptedEncoder) else encoder  # what is cached
    marker = np.zeros(base.dim, dtype=np.float32)
    marker[0] = 1.0  # no text embeds to this: a vector found in Qdrant came from the cache
    cache_dir = tmp_path / "embeddings"
    cache = DiskCache(cache_dir, base.name)
    texts = [d.text for d in catalog_documents(builtin_tools(), settings.retriever)]
    for text in texts:
        cache.vectors[text_key(text)] = marker
    cache.save()
    expected = embed_documents(encoder, texts, cache_dir=cache_dir, progress=False)[0]

    catalog = CatalogService(settings, encoders)
    await catalog.get()
    catalog.close()
    first.release()
    encoders.close()

    client = QdrantClient(path=str(tmp_path / "qdrant-1"))
    name = collection_name(settings.retriever.catalog, encoder.name)
    points, _ = client.scroll(name, limit=100, with_vectors=True)
    client.close()
    assert len(points) == len(builtin_tools())
    assert all(np.allclose(point.vector, expected, atol=1e-5) for point in points)
    assert not (tmp_path / "qdrant" / "collection").exists()  # the held folder was left alone


async def test_a_restart_on_the_same_folder_embeds_nothing(tmp_path: Path) -> None:
    """The index comes from Qdrant and the gate's vectors from the embeddings cache: the
    second start of a process on a data folder runs no forward pass for the catalog."""
    settings = load_settings(data_dir=tmp_path, planner={"memory_k": 0}, orchestrate={"gate": True})
    for start in ("first", "restart"):
        encoders = EncoderService(settings.retriever)
        encoder = await encoders.encoder()  # the gate's encoder is its base: one counter
        before = encoder.counts.texts
        catalog = CatalogService(settings, encoders)
        loaded = await catalog.get()
        embedded = encoder.counts.texts - before
        catalog.close()
        encoders.close()
        assert loaded.gate is not None
        if start == "first":
            assert embedded >= 2 * len(builtin_tools())  # the index's and the gate's
    assert embedded == 0
