"""What the LLM policy's tests share: a three-step request, the decomposition the fake
upstream answers for it, the replies it is scripted with, and a planner that asks every
pick and reflects only when told to."""

from __future__ import annotations

import json
from typing import Any

from proxy.config import PlannerSettings
from proxy.plan.candidates import CandidateFinder
from proxy.plan.planner import RequestPlanner
from retriever.embedder import Encoder
from testing.fake_upstream import FakeUpstream, Script

REQUEST = "Find a flight from Beijing to Paris, book it for Li Lei and text my wife."


STEPS = {
    "subtasks": [
        {
            "id": "s1",
            "text": "find flights from Beijing to Paris",
            "category": "travel",
            "needs": [],
        },
        {
            "id": "s2",
            "text": "book a seat on the flight for Li Lei",
            "category": "travel",
            "needs": ["s1"],
        },
        {"id": "s3", "text": "send my wife a text message", "category": "travel", "needs": ["s2"]},
    ]
}


def reply(value: object) -> Script:
    return Script(text=value if isinstance(value, str) else json.dumps(value))


def pick(n: int, why: str = "fits") -> Script:
    return reply({"choice": n, "reason": why})


def planner(finder: CandidateFinder, encoder: Encoder, **config: Any) -> RequestPlanner:
    values: dict[str, Any] = {"profile": "full", "top_k": 3, "reflection_rounds": 0, "memory_k": 0}
    values.update(config)
    return RequestPlanner(finder, encoder, PlannerSettings(**values))


def prompts(upstream: FakeUpstream) -> list[str]:
    return ["\n".join(m["content"] for m in r.body["messages"]) for r in upstream.requests]
