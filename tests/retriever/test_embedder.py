"""The encoders, the caches and micro-batching, on the real all-MiniLM-L6-v2."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import numpy as np
import pytest
from redis.asyncio import Redis

from retriever.batching import BatchingEmbedder
from retriever.cache import EmbeddingCache, LayeredCache, LRUCache, RedisCache
from retriever.config import RetrieverConfig
from retriever.embedder import Encoder, Vectors, load_encoder
from retriever.errors import ModelNotFound
from tests.conftest import free_port


def test_vectors_are_normalised_and_meaningful(encoder: Encoder) -> None:
    vectors = encoder.encode(
        [
            "weather forecast for a city",
            "what will the weather be tomorrow in Paris",
            "convert euros to dollars",
        ]
    )
    assert vectors.shape == (3, 384)
    assert vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    weather, question, money = vectors
    assert weather @ question > weather @ money + 0.2


def test_a_batch_gives_the_same_vectors_as_one_by_one(encoder: Encoder) -> None:
    texts = ["short", "a much longer sentence that needs padding in the batch to match"]
    together = encoder.encode(texts)
    alone = np.stack([encoder.encode([t])[0] for t in texts])
    assert np.allclose(together, alone, atol=1e-5)


def test_a_missing_model_folder_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFound, match="never downloaded"):
        load_encoder(RetrieverConfig(model_path=tmp_path / "bge-m3"))


async def test_concurrent_queries_share_one_forward_pass(encoder: Encoder) -> None:
    embedder = BatchingEmbedder(encoder, LRUCache(0), window_ms=20, max_batch=64)
    texts = [f"find flights from city number {i}" for i in range(10)]
    results = await asyncio.gather(*(embedder.embed([t]) for t in texts))
    assert embedder.stats.passes == 1
    assert embedder.stats.largest_pass == 10
    # Each caller gets its own text's vector, not a neighbour's.
    for text, result in zip(texts, results, strict=True):
        assert np.allclose(result[0], encoder.encode([text])[0], atol=1e-5)
    embedder.close()


async def test_a_full_batch_does_not_wait_for_the_window(encoder: Encoder) -> None:
    embedder = BatchingEmbedder(encoder, LRUCache(0), window_ms=60_000, max_batch=4)
    texts = [f"query {i}" for i in range(8)]
    await asyncio.wait_for(asyncio.gather(*(embedder.embed([t]) for t in texts)), 30)
    assert embedder.stats.passes == 2
    assert embedder.stats.largest_pass == 4
    embedder.close()


async def test_a_repeated_text_is_served_from_the_cache(encoder: Encoder) -> None:
    embedder = BatchingEmbedder(encoder, LRUCache(100), window_ms=0)
    first = await embedder.embed(["book a table for two", "book a table for two"])
    assert embedder.stats.encoded == 1  # duplicates inside a request are embedded once
    second = await embedder.embed(["book a table for two"])
    assert embedder.stats.passes == 1
    assert embedder.stats.cache_hits == 1
    assert np.array_equal(first[0], second[0])
    embedder.close()


async def test_a_long_list_is_embedded_in_passes_of_similar_length(encoder: Encoder) -> None:
    """A pass pads every text to its longest: 16 short and 16 long texts, interleaved,
    cost what the two groups cost apart, not two passes of long ones."""
    short = [f"get item {i}" for i in range(16)]
    long = [
        f"tool {i}: " + "reads the record and returns every field of it " * 8 for i in range(16)
    ]
    before = encoder.counts.tokens
    encoder.encode(short)
    encoder.encode(long)
    apart = encoder.counts.tokens - before
    embedder = BatchingEmbedder(encoder, LRUCache(0), window_ms=0, max_batch=16)
    mixed = [text for pair in zip(short, long, strict=True) for text in pair]

    before = encoder.counts.tokens
    vectors = await embedder.embed(mixed)

    assert encoder.counts.tokens - before == apart
    assert embedder.stats.passes == 2
    # Each text still gets its own row, in the order asked.
    assert np.allclose(vectors[1], encoder.encode([long[0]])[0], atol=1e-5)
    assert np.allclose(vectors[2], encoder.encode([short[1]])[0], atol=1e-5)
    embedder.close()


class _TellingCache(LRUCache):
    """The LRU, setting ``stored`` once something is put in it."""

    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.stored = asyncio.Event()

    async def put_many(self, model: str, texts: Sequence[str], vectors: Vectors) -> None:
        await super().put_many(model, texts, vectors)
        self.stored.set()


async def test_a_cancelled_request_leaves_the_passes_it_finished_in_the_cache(
    encoder: Encoder,
) -> None:
    """A client that hangs up (or times out) part-way through a long tool list: its retry
    embeds only what was not done."""
    cache = _TellingCache(1000)
    embedder = BatchingEmbedder(encoder, cache, window_ms=0, max_batch=8)
    texts = [f"tool number {i} sends a parcel to an address" for i in range(40)]
    request = asyncio.create_task(embedder.embed(texts))
    await cache.stored.wait()  # the first pass is done and cached
    request.cancel()
    with pytest.raises(asyncio.CancelledError):
        await request
    cached = len(cache)
    before = encoder.counts.texts

    await embedder.embed(texts)

    assert cached >= 8
    # The pass running when it was cancelled may be embedded again (or cached meanwhile).
    assert encoder.counts.texts - before <= len(texts) - cached
    embedder.close()


async def test_the_cache_key_includes_the_model(encoder: Encoder) -> None:
    cache = LRUCache(10)
    await cache.put_many("model-a", ["x"], np.ones((1, 3), dtype=np.float32))
    assert (await cache.get_many("model-b", ["x"])) == [None]


@pytest.fixture(params=["lru", "redis", "layered"])
async def cache(request: pytest.FixtureRequest) -> AsyncIterator[EmbeddingCache]:
    if request.param == "lru":
        yield LRUCache(3)
        return
    redis = Redis.from_url(request.getfixturevalue("redis_server"))
    await redis.flushdb()
    far = RedisCache(redis, ttl_s=60)
    yield far if request.param == "redis" else LayeredCache(LRUCache(3), far)
    await redis.aclose()


async def test_every_cache_returns_what_was_stored(cache: EmbeddingCache) -> None:
    vectors = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert await cache.get_many("m", ["a", "b"]) == [None, None]
    await cache.put_many("m", ["a", "b"], vectors)
    a, missing, b = await cache.get_many("m", ["a", "zzz", "b"])
    assert missing is None
    assert a is not None
    assert np.array_equal(a, vectors[0])
    assert b is not None
    assert np.array_equal(b, vectors[1])


async def test_an_unreachable_redis_is_a_cache_that_misses(
    caplog: pytest.LogCaptureFixture,
) -> None:
    redis = Redis.from_url(f"redis://127.0.0.1:{free_port()}/0")  # nothing listens
    cache = LayeredCache(LRUCache(3), RedisCache(redis, ttl_s=60))
    vectors = np.ones((2, 3), dtype=np.float32)
    assert await cache.get_many("m", ["a", "b"]) == [None, None]
    await cache.put_many("m", ["a", "b"], vectors)  # kept near, lost far: no error
    assert [v is not None for v in await cache.get_many("m", ["a", "b", "c"])] == [
        True,
        True,
        False,
    ]
    warnings = [r for r in caplog.records if r.name == "retriever.cache"]
    assert len(warnings) == 1  # one per minute, not one per lookup
    await redis.aclose()


async def test_the_lru_forgets_the_least_recently_used() -> None:
    cache = LRUCache(2)
    one = np.ones((1, 2), dtype=np.float32)
    await cache.put_many("m", ["a"], one)
    await cache.put_many("m", ["b"], one)
    await cache.get_many("m", ["a"])  # a is now the most recent
    await cache.put_many("m", ["c"], one)
    assert [v is not None for v in await cache.get_many("m", ["a", "b", "c"])] == [
        True,
        False,
        True,
    ]


async def test_redis_shares_embeddings_between_processes(
    encoder: Encoder, redis_server: str
) -> None:
    redis = Redis.from_url(redis_server)
    await redis.flushdb()
    first = BatchingEmbedder(
        encoder, LayeredCache(LRUCache(10), RedisCache(redis, 60)), window_ms=0
    )
    vector = await first.embed(["send an email"])
    # A second embedder with an empty LRU (another pod) finds it in Redis.
    second = BatchingEmbedder(
        encoder, LayeredCache(LRUCache(10), RedisCache(redis, 60)), window_ms=0
    )
    again = await second.embed(["send an email"])
    assert second.stats.passes == 0
    assert np.array_equal(vector, again)
    first.close()
    second.close()
    await redis.aclose()


@pytest.mark.extra("gpu")
@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_the_encoder_gives_flagembeddings_vectors(pooling: str) -> None:
    """FlagEncoder loads and pools as FlagModel does, without importing FlagEmbedding."""
    from FlagEmbedding import FlagModel

    from retriever.embedder import bundled_model_path

    texts = ["weather forecast for a city", "a longer sentence, padded in the batch", "x"]
    config = RetrieverConfig(pooling=pooling, adapter=False, onnx_query_precision="fp32")  # type: ignore[arg-type]
    encoder = load_encoder(config)
    reference = FlagModel(str(bundled_model_path()), pooling_method=pooling, devices="cpu")
    expected = reference.encode(texts, batch_size=len(texts), convert_to_numpy=True)
    # Not bit for bit: FlagModel sorts a batch by length, so the padding differs.
    cosines = (encoder.encode(texts) * expected).sum(axis=1)
    assert np.all(cosines > 0.99999), cosines
