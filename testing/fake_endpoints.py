"""The fake upstream's answers on the routes beside chat: models, embeddings, moderations.

:mod:`testing.fake_upstream` serves them; tests compare against :func:`embedding_of`.
"""

from __future__ import annotations

import base64
import hashlib
import struct
from typing import Any

_CATEGORIES = ("harassment", "hate", "illicit", "self-harm", "sexual", "violence")
EMBEDDING_SIZE = 8


def model_list(models: list[str]) -> dict[str, Any]:
    """``GET /models``: the listed names."""
    return {
        "object": "list",
        "data": [{"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in models],
    }


def embedding_of(text: str) -> list[float]:
    """The fake's embedding of ``text``: a few floats that differ from text to text."""
    digest = hashlib.sha256(text.encode()).digest()
    return [byte / 255 for byte in digest[:EMBEDDING_SIZE]]


def embeddings(request: dict[str, Any]) -> dict[str, Any]:
    """``POST /embeddings``: :func:`embedding_of` each input, as floats or base64."""
    inputs = request.get("input")
    texts = [str(i) for i in inputs] if isinstance(inputs, list) else [str(inputs)]
    as_base64 = request.get("encoding_format") == "base64"
    data = []
    for index, text in enumerate(texts):
        vector = embedding_of(text)
        packed = base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()
        data.append(
            {"object": "embedding", "index": index, "embedding": packed if as_base64 else vector}
        )
    tokens = sum(len(text.split()) for text in texts)
    return {
        "object": "list",
        "data": data,
        "model": str(request.get("model")),
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


def moderations(request: dict[str, Any], number: int) -> dict[str, Any]:
    """Each input flagged for violence when it says "attack", for nothing else."""
    inputs = request.get("input")
    texts = [str(i) for i in inputs] if isinstance(inputs, list) else [str(inputs)]
    results = []
    for text in texts:
        violent = "attack" in text.lower()
        categories = {c: c == "violence" and violent for c in _CATEGORIES}
        scores = {c: 0.9 if flagged else 0.01 for c, flagged in categories.items()}
        results.append({"flagged": violent, "categories": categories, "category_scores": scores})
    model = str(request.get("model") or "omni-moderation-latest")
    return {"id": f"modr-fake{number:06d}", "model": model, "results": results}
