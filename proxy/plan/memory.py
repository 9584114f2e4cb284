"""Long-term memory: successful ``(sub-task text, tool path)`` pairs in Qdrant.

A path is written only once the executor reports that the plan ran successfully
(:meth:`PlanMemory.remember` takes the run and checks it); the ``k`` most similar
past sub-tasks are shown to the model as examples when it picks tools.
Short-term memory (the current path with the reason of every move) lives in
:class:`proxy.plan.search.Walk`.
"""

from __future__ import annotations

import uuid

from qdrant_client import QdrantClient, models

from proxy.execute.scheduler import PlanRun
from proxy.plan.model import Plan, topological
from retriever.embedder import Vectors

_NAMESPACE = uuid.UUID("5b0d5c1e-9d8f-4a0c-9a57-3c1b2f6e7a10")


class PlanMemory:
    def __init__(self, client: QdrantClient, collection: str, dim: int) -> None:
        self._client = client
        self.collection = collection
        if not client.collection_exists(collection):
            client.create_collection(
                collection,
                vectors_config=models.VectorParams(size=dim, distance=models.Distance.COSINE),
            )

    def remember(self, plan: Plan, run: PlanRun, vectors: dict[str, Vectors]) -> int:
        """Store each sub-task's path if the whole run succeeded; how many were stored."""
        if not run.ok or not run.records or plan.no_tools:
            return 0
        points = []
        for task in topological(plan.subtasks):
            path = self._path(plan, task.id)
            if not path or task.id not in vectors:
                continue
            points.append(
                models.PointStruct(
                    id=str(uuid.uuid5(_NAMESPACE, f"{task.text}\0{'>'.join(path)}")),
                    vector=vectors[task.id].tolist(),
                    payload={"text": task.text, "path": path},
                )
            )
        if points:
            self._client.upsert(self.collection, points)
        return len(points)

    def recall(self, vector: Vectors, k: int) -> dict[str, list[str]]:
        """The ``k`` most similar past sub-tasks and their paths."""
        if k <= 0:
            return {}
        hits = self._client.query_points(self.collection, query=vector.tolist(), limit=k).points
        found: dict[str, list[str]] = {}
        for hit in hits:
            payload = hit.payload or {}
            text, path = payload.get("text"), payload.get("path")
            if isinstance(text, str) and isinstance(path, list):
                found[text] = [str(step) for step in path]
        return found

    def count(self) -> int:
        return self._client.count(self.collection).count

    @staticmethod
    def _path(plan: Plan, subtask: str) -> list[str]:
        """The tools along the chain of needs that leads to ``subtask`` (first needs first)."""
        by_id = {task.id: task for task in plan.subtasks}
        chain: list[str] = []
        current: str | None = subtask
        while current is not None and current not in chain:
            chain.insert(0, current)
            needs = [n for n in by_id[current].needs if n in plan.choices]
            current = needs[0] if needs else None
        return [plan.choices[i] for i in chain if i in plan.choices]
