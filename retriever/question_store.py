"""The catalog's question rows (``retriever.expand_documents``) in Qdrant, and read into
the in-process index.

Each tool's questions (:mod:`retriever.expansion`) are points of a collection of their
own, ``<catalog collection>-questions``, payload ``{tool_id, digest, text}``: the
tools' collection keeps one point per tool, which its readers count on. ``digest`` is
the tool's :func:`~retriever.expansion.questions_digest` (its name, description, group
and parameter names), so :meth:`QdrantQuestions.sync` embeds the questions of a tool
only when those changed: a re-import of the same tools embeds nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from qdrant_client import QdrantClient, models

from retriever.documents import ToolDocument, ToolFields
from retriever.embedder import Vectors
from retriever.expansion import MAX_QUESTIONS, questions, questions_digest
from retriever.index import ExtraRows
from retriever.owned_client import OwnedClient
from retriever.qdrant_store import ensure_collection, point_id, scroll_points

_UPSERT_BATCH = 512


@dataclass(frozen=True, slots=True)
class ToolQuestions:
    """One tool's questions as written now."""

    tool_id: str
    digest: str
    texts: tuple[str, ...]


def written_questions(fields: Sequence[ToolFields]) -> list[ToolQuestions]:
    """Every tool's questions (pure; kept in process by digest)."""
    return [ToolQuestions(f.id, questions_digest(f), questions(f)) for f in fields]


def extra_rows(
    documents: Sequence[ToolDocument], stored: dict[str, tuple[list[str], Vectors]]
) -> ExtraRows | None:
    """The question rows of ``documents``' tools (``stored``: texts and vectors by tool
    id), each owned by its tool's row; None when none of them has questions."""
    parts: list[Vectors] = []
    owners: list[int] = []
    for row, doc in enumerate(documents):
        found = stored.get(doc.id)
        if found is not None and len(found[1]):
            parts.append(found[1])
            owners += [row] * len(found[1])
    if not parts:
        return None
    return ExtraRows(np.concatenate(parts).astype(np.float32), np.asarray(owners, dtype=np.intp))


class QdrantQuestions:
    """The question rows' collection; its methods block, as :class:`QdrantCatalog`'s."""

    def __init__(self, client: OwnedClient, tools_collection: str, dim: int) -> None:
        self._client = client
        self.collection = f"{tools_collection}-questions"
        self.dim = dim

    def sync(self, wanted: Sequence[ToolQuestions], embed: Callable[[list[str]], Vectors]) -> int:
        """Make the collection hold exactly ``wanted``'s questions; the number of tools
        whose questions were embedded or removed (0: nothing changed)."""
        local = self._client.is_local
        self._client.call(lambda c: ensure_collection(c, self.collection, self.dim, (), local))
        before = self._digests()
        changed = [tool for tool in wanted if before.get(tool.tool_id) != tool.digest]
        gone = sorted(set(before) - {tool.tool_id for tool in wanted})
        self._delete([t.tool_id for t in changed if t.tool_id in before] + gone)
        for start in range(0, len(changed), _UPSERT_BATCH):
            batch = changed[start : start + _UPSERT_BATCH]
            texts = [text for tool in batch for text in tool.texts]
            vectors = iter(embed(texts))  # outside the client's thread
            points = [
                models.PointStruct(
                    id=_question_id(tool.tool_id, i),
                    vector=next(vectors).tolist(),
                    payload={
                        "tool_id": tool.tool_id,
                        "digest": tool.digest,
                        "n": i,
                        "text": text,
                    },
                )
                for tool in batch
                for i, text in enumerate(tool.texts)
            ]
            self._upsert(points)
        return len(changed) + len(gone)

    def load(self) -> dict[str, tuple[list[str], Vectors]]:
        """Every tool's question texts and vectors, by tool id, in the order written."""
        if not self._client.call(lambda c: bool(c.collection_exists(self.collection))):
            return {}
        rows = self._client.call(lambda c: self._scroll(c, with_vectors=True))
        by_tool: dict[str, list[tuple[int, str, list[float]]]] = {}
        for payload, vector in rows:
            row = (_int(payload.get("n")), str(payload.get("text", "")), vector)
            by_tool.setdefault(str(payload.get("tool_id", "")), []).append(row)
        loaded = {}
        for tool_id, found in by_tool.items():
            found.sort(key=lambda row: row[0])
            vectors = np.asarray([v for _, _, v in found], dtype=np.float32).reshape(-1, self.dim)
            loaded[tool_id] = ([t for _, t, _ in found], vectors)
        return loaded

    def _upsert(self, points: list[models.PointStruct]) -> None:
        self._client.call(lambda c: c.upsert(self.collection, points=points, wait=True))

    def _digests(self) -> dict[str, str]:
        rows = self._client.call(lambda c: self._scroll(c, with_vectors=False))
        return {str(p.get("tool_id", "")): str(p.get("digest", "")) for p, _ in rows}

    def _delete(self, tool_ids: Sequence[str]) -> None:
        if not tool_ids:
            return
        ids = [_question_id(t, i) for t in tool_ids for i in range(MAX_QUESTIONS)]
        selector = models.PointIdsList(points=ids)  # type: ignore[arg-type]
        self._client.call(lambda c: c.delete(self.collection, points_selector=selector, wait=True))

    def _scroll(
        self, client: QdrantClient, *, with_vectors: bool
    ) -> list[tuple[dict[str, object], list[float]]]:
        return scroll_points(client, self.collection, with_vectors=with_vectors)


def _question_id(tool_id: str, number: int) -> str:
    return point_id(f"{tool_id}\0question-{number}")


def _int(value: object) -> int:
    return value if isinstance(value, int) else 0
