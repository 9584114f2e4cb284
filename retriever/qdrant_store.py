"""Qdrant as the system of record for a catalog's vectors.

One collection per catalog and model (``<catalog>-<model>``: vectors of two models
never share one), cosine distance, one point per tool with the payload
``{tool_id, name, category, group, digest, text}`` (the text feeds BM25 at start-up).
:meth:`QdrantCatalog.sync` re-embeds only tools whose document digest changed and
deletes tools that left the catalog.
Local mode (``path=``, under the data directory) and a server (``url=``) are the
same API; local mode allows one client per folder, so each worker process of a
server claims a folder of its own (:func:`claim_local_folder`), and is not
thread-safe, so every call goes through the client's own thread
(:class:`retriever.owned_client.OwnedClient`).
"""

from __future__ import annotations

import fcntl
import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np
from qdrant_client import QdrantClient, models

from retriever.documents import ToolDocument
from retriever.embedder import Vectors
from retriever.errors import FoldersTaken
from retriever.owned_client import OwnedClient

_UPSERT_BATCH = 512
_SCROLL_BATCH = 2048
_NAMESPACE = uuid.UUID("5d7a3f4e-0c55-4b8e-9a43-1f3f64b0c0de")


@dataclass(frozen=True)
class SyncReport:
    added: int
    updated: int
    removed: int
    unchanged: int
    questions: int = 0  # tools whose question rows were embedded or removed

    @property
    def changed(self) -> bool:
        return bool(self.added or self.updated or self.removed or self.questions)

    def summary(self) -> str:
        text = (
            f"{self.added} added, {self.updated} re-embedded, {self.removed} removed, "
            f"{self.unchanged} unchanged"
        )
        return text + (f", questions of {self.questions} tools embedded" if self.questions else "")


@dataclass(frozen=True)
class StoredPoint:
    tool_id: str
    name: str
    category: str
    group: str
    digest: str
    text: str


def open_client(data_dir: Path, url: str | None) -> OwnedClient:
    if url:
        # The version check runs in a thread of its own at construction and, with the
        # server down, ends in a warning and an exception nobody can catch; /readyz
        # watches the server instead.
        return OwnedClient(QdrantClient(url=url, timeout=30, check_compatibility=False))
    folder = data_dir / "qdrant"
    folder.mkdir(parents=True, exist_ok=True)
    return OwnedClient(QdrantClient(path=str(folder)))


@dataclass
class LocalFolder:
    """A local-mode folder this process holds until :meth:`release`."""

    path: Path
    slot: int
    _lock: IO[str]

    def release(self) -> None:
        self._lock.close()


def claim_local_folder(data_dir: Path, slots: int = 256) -> LocalFolder:
    """The first folder no other process holds: ``qdrant`` (the one ``toolgraph index
    build`` fills), else ``qdrant-1``, ``qdrant-2``… The claim is an ``flock`` on a
    file beside the folder, held while the process lives; the folders stay, so a
    worker that starts again finds its vectors there."""
    for slot in range(slots):
        name = "qdrant" if slot == 0 else f"qdrant-{slot}"
        lock = (data_dir / f"{name}.lock").open("a")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            continue
        folder = data_dir / name
        folder.mkdir(parents=True, exist_ok=True)
        return LocalFolder(folder, slot, lock)
    raise FoldersTaken(f"all {slots} Qdrant folders under {data_dir} are held by other processes")


def collection_name(catalog: str, model: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", model.lower()).strip("-")
    return f"{catalog}-{slug}"[:200]


def point_id(tool_id: str) -> str:
    return str(uuid.uuid5(_NAMESPACE, tool_id))


def probe(client: QdrantClient, collection: str) -> None:
    """Count ``collection``'s points: raises when it no longer works (readiness).

    Local mode masks the same point arrays for a count as for a search, so arrays
    out of step fail both; a count costs a fraction of a search (20,000 points of
    384 dimensions: under 0.1 ms against 115 ms for a search of one).
    """
    client.count(collection, exact=True)


def ensure_collection(
    client: QdrantClient, name: str, dim: int, keywords: Sequence[str], local: bool
) -> None:
    """Create a cosine collection of ``dim``-vectors unless it exists, with a keyword
    index on each payload field in ``keywords`` on a server (local mode scans anyway,
    and warns about indexes)."""
    if client.collection_exists(name):
        return
    client.create_collection(
        name, vectors_config=models.VectorParams(size=dim, distance=models.Distance.COSINE)
    )
    if not local:
        for key in keywords:
            client.create_payload_index(name, key, field_schema=models.PayloadSchemaType.KEYWORD)


class QdrantCatalog:
    """A catalog's collection; its methods block, so a coroutine calls them in a thread."""

    def __init__(self, client: OwnedClient, collection: str, dim: int) -> None:
        self._client = client
        self.collection = collection
        self.dim = dim

    @property
    def client(self) -> OwnedClient:
        return self._client

    def exists(self) -> bool:
        return self._client.call(lambda c: bool(c.collection_exists(self.collection)))

    def close(self) -> None:
        """Close the client: its owning thread keeps it alive, so the garbage collector
        never releases a local folder's lock for the next client of this process."""
        self._client.close()

    async def probe(self) -> None:
        """Count the collection on the client's own thread: raises when it no longer
        works (readiness)."""
        await self._client.run(lambda c: probe(c, self.collection))

    def ensure(self) -> None:
        local = self._client.is_local
        self._client.call(
            lambda c: ensure_collection(c, self.collection, self.dim, ("category", "group"), local)
        )

    def stored(self) -> dict[str, StoredPoint]:
        """Every stored tool's payload, by tool id."""
        return {point.tool_id: point for point, _ in self._scroll(with_vectors=False)}

    def load(self) -> tuple[list[StoredPoint], Vectors]:
        """Every point with its vector, in a stable order (by tool id)."""
        rows = sorted(self._scroll(with_vectors=True), key=lambda row: row[0].tool_id)
        if not rows:
            return [], np.zeros((0, self.dim), dtype=np.float32)
        vectors = np.asarray([vector for _, vector in rows], dtype=np.float32)
        return [point for point, _ in rows], vectors

    def sync(
        self, documents: Sequence[ToolDocument], embed: Callable[[list[str]], Vectors]
    ) -> SyncReport:
        """Make the collection hold exactly ``documents``, embedding only what changed."""
        self.ensure()
        before = self.stored()
        changed = [doc for doc in documents if _digest(before.get(doc.id)) != doc.digest]
        for start in range(0, len(changed), _UPSERT_BATCH):
            batch = changed[start : start + _UPSERT_BATCH]
            vectors = embed([doc.text for doc in batch])  # outside the client's thread
            points = [
                models.PointStruct(
                    id=point_id(doc.id), vector=vector.tolist(), payload=_payload(doc)
                )
                for doc, vector in zip(batch, vectors, strict=True)
            ]
            self._upsert(points)
        gone = set(before) - {doc.id for doc in documents}
        if gone:
            selector = models.PointIdsList(points=[point_id(t) for t in sorted(gone)])
            self._client.call(
                lambda c: c.delete(self.collection, points_selector=selector, wait=True)
            )
        added = sum(doc.id not in before for doc in changed)
        return SyncReport(
            added=added,
            updated=len(changed) - added,
            removed=len(gone),
            unchanged=len(documents) - len(changed),
        )

    def _upsert(self, points: list[models.PointStruct]) -> None:
        self._client.call(lambda c: c.upsert(self.collection, points=points, wait=True))

    def search(
        self,
        vector: Vectors,
        k: int,
        *,
        category: str | None = None,
        group: str | None = None,
    ) -> list[tuple[str, float]]:
        """(tool id, cosine) best first, optionally within one category or group."""
        conditions: list[models.Condition] = [
            models.FieldCondition(key=key, match=models.MatchValue(value=value))
            for key, value in (("category", category), ("group", group))
            if value is not None
        ]
        response = self._client.call(
            lambda c: c.query_points(
                self.collection,
                query=vector.tolist(),
                limit=k,
                query_filter=models.Filter(must=conditions) if conditions else None,
                with_payload=["tool_id"],
            )
        )
        return [(str((p.payload or {})["tool_id"]), float(p.score)) for p in response.points]

    def _scroll(self, *, with_vectors: bool) -> list[tuple[StoredPoint, list[float]]]:
        return self._client.call(lambda c: self._scroll_all(c, with_vectors))

    def _scroll_all(
        self, client: QdrantClient, with_vectors: bool
    ) -> list[tuple[StoredPoint, list[float]]]:
        rows = scroll_points(client, self.collection, with_vectors=with_vectors)
        return [(_stored(payload), vector) for payload, vector in rows]


def _payload(doc: ToolDocument) -> dict[str, str]:
    return {
        "tool_id": doc.id,
        "name": doc.name,
        "category": doc.category,
        "group": doc.group,
        "digest": doc.digest,
        "text": doc.text,
    }


def _stored(payload: dict[str, object]) -> StoredPoint:
    return StoredPoint(
        tool_id=str(payload.get("tool_id", "")),
        name=str(payload.get("name", "")),
        category=str(payload.get("category", "")),
        group=str(payload.get("group", "")),
        digest=str(payload.get("digest", "")),
        text=str(payload.get("text", "")),
    )


def _digest(point: StoredPoint | None) -> str | None:
    return point.digest if point is not None else None


def scroll_points(
    client: QdrantClient, collection: str, *, with_vectors: bool
) -> list[tuple[dict[str, object], list[float]]]:
    """Every point of ``collection``, page by page: its payload and (if asked) its vector."""
    rows: list[tuple[dict[str, object], list[float]]] = []
    offset: models.ExtendedPointId | None = None
    while True:
        points, offset = client.scroll(
            collection,
            limit=_SCROLL_BATCH,
            offset=offset,
            with_payload=True,
            with_vectors=with_vectors,
        )
        for point in points:
            vector = point.vector if isinstance(point.vector, list) else []
            rows.append((dict(point.payload or {}), [float(x) for x in vector]))  # type: ignore[arg-type]
        if offset is None:
            return rows
