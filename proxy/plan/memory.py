"""Long-term memory: successful ``(sub-task text, tool path)`` pairs in Qdrant.

A path is written only once the executor reports that the plan ran successfully
(:meth:`PlanMemory.remember` takes the run and checks it); the run is anything
shaped like a :class:`RunResult` (the executor's ``PlanRun`` is), so the planner
never imports the executor's scheduler: the engine's arrow runs one way, from the
planner to the plan the executor runs. The ``k`` most similar
past sub-tasks are shown to the model as examples when it picks tools.
Short-term memory (the current path with the reason of every move) lives in
:class:`proxy.plan.search.Walk`.

Each point belongs to one client: its payload holds a hash of the client's key
(never the key), and a recall searches only the asking client's points, so one
client's words never reach another client's prompts. The sub-task text is masked
before it is stored (:func:`proxy.masking.mask_secrets`): the proxy's own secrets
as in traces, and words shaped like credentials. Every call runs on the Qdrant
client's own thread (local mode is not thread-safe), awaited.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Protocol

from qdrant_client import QdrantClient, models

from proxy.masking import mask_secrets
from proxy.plan.model import Plan, topological
from retriever.embedder import Vectors
from retriever.owned_client import OwnedClient
from retriever.qdrant_store import ensure_collection, probe

_NAMESPACE = uuid.UUID("5b0d5c1e-9d8f-4a0c-9a57-3c1b2f6e7a10")
_SCOPE = "client"  # the payload field with the hash of the client's key


class RunResult(Protocol):
    """What the memory needs of a plan's run: whether it went well, and its calls."""

    @property
    def ok(self) -> bool:
        """Whether every call of the run succeeded."""
        ...

    @property
    def records(self) -> Mapping[str, object]:
        """One record per call that ran (or should have), by plan node id."""
        ...


class PlanMemory:
    """``secrets``: masked out of every stored text (the settings' keys)."""

    def __init__(
        self, client: OwnedClient, collection: str, dim: int, secrets: Sequence[str] = ()
    ) -> None:
        self._client = client
        self.collection = collection
        self.dim = dim
        self._secrets = tuple(secrets)

    def create(self) -> None:
        """Create the collection when it is missing (from a worker thread)."""
        self._client.call(self._create)

    async def remember(
        self, plan: Plan, run: RunResult, vectors: Mapping[str, Vectors], scope: str
    ) -> int:
        """Store each sub-task's path for the client ``scope`` (a hash of its key) if
        the whole run succeeded; how many were stored."""
        if not run.ok or not run.records or plan.no_tools:
            return 0
        points = self._points(plan, vectors, scope)
        if points:
            await self._client.run(lambda c: c.upsert(self.collection, points))
        return len(points)

    async def recall(self, vectors: Sequence[Vectors], k: int, scope: str) -> dict[str, list[str]]:
        """The ``k`` past sub-tasks of client ``scope`` most similar to each of
        ``vectors``, and their paths (one hop to the client's thread for all)."""
        if k <= 0 or not vectors:
            return {}
        only = models.Filter(
            must=[models.FieldCondition(key=_SCOPE, match=models.MatchValue(value=scope))]
        )
        requests = [
            models.QueryRequest(query=v.tolist(), limit=k, filter=only, with_payload=True)
            for v in vectors
        ]
        responses = await self._client.run(
            lambda c: c.query_batch_points(self.collection, requests)
        )
        found: dict[str, list[str]] = {}
        for response in responses:
            for hit in response.points:
                payload = hit.payload or {}
                text, path = payload.get("text"), payload.get("path")
                if isinstance(text, str) and isinstance(path, list):
                    found[text] = [str(step) for step in path]
        return found

    async def probe(self) -> None:
        """Count the collection: raises when it no longer works (readiness)."""
        await self._client.run(lambda c: probe(c, self.collection))

    async def count(self) -> int:
        return await self._client.run(lambda c: c.count(self.collection).count)

    def _create(self, client: QdrantClient) -> None:
        ensure_collection(client, self.collection, self.dim, (_SCOPE,), self._client.is_local)

    def _points(
        self, plan: Plan, vectors: Mapping[str, Vectors], scope: str
    ) -> list[models.PointStruct]:
        points = []
        for task in topological(plan.subtasks):
            path = self._path(plan, task.id)
            if not path or task.id not in vectors:
                continue
            text = mask_secrets(task.text, self._secrets)
            points.append(
                models.PointStruct(
                    id=str(uuid.uuid5(_NAMESPACE, f"{scope}\0{text}\0{'>'.join(path)}")),
                    vector=vectors[task.id].tolist(),
                    payload={"text": text, "path": path, _SCOPE: scope},
                )
            )
        return points

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
