"""Orchestrate mode over a knowledge graph named in one settings entry: a three-hop
question (find_entities → get_neighbors → argmax) through the official SDK, whose
calls pass entity sets by variable name (#0, #1) within the request; the fake
upstream plays the model (testing/brain.py), and a wrong relation it writes first is
corrected from the pack's refusal."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from testing.brain import Brain, plan_of
from testing.fake_upstream import FakeUpstream
from tests.conftest import StartProxy
from tests.orchestrate.conftest import ORCHESTRATE, sdk, trace, user

GEO = "http://example.org/geo/"
QUESTION = "Which country bordering Spain has the most people?"


@dataclass
class CorrectingBrain(Brain):
    """Writes a misspelt relation first, and the right one once told."""

    relations: list[str] = field(default_factory=list)

    def arguments_for(self, task: str) -> Any:
        if "Follow" in task and self.relations:
            return {"variable": "#0", "relation": self.relations.pop(0)}
        return super().arguments_for(task)


def test_a_three_hop_question_passes_variables_between_calls(
    start_proxy: StartProxy, upstream: FakeUpstream
) -> None:
    brain = CorrectingBrain(relations=[GEO + "bordrs", GEO + "borders"])
    upstream.responder = brain
    server = start_proxy(
        packs={"knowledge_graph": [{"name": "geo", "path": "demo", "description": "places"}]},
        planner={"policy": "llm", "top_k": 10, "memory_k": 0},
        orchestrate={"builtin_tools": False},
    )
    brain.plan = plan_of(
        ("Find the entity Spain in the geo knowledge graph", []),
        ("Follow the borders relation from Spain in the geo knowledge graph", ["s1"]),
        ("Keep the neighbour with the highest population in the geo knowledge graph", ["s2"]),
    )
    brain.tools = {
        "Find the entity": "geo_find_entities",
        "Follow": "geo_get_neighbors",
        "highest population": "geo_argmax",
    }
    brain.arguments = {
        "Find the entity": {"name": "Spain"},
        "highest population": {"variable": "#1", "attribute": GEO + "population"},
    }
    raw = sdk(server, timeout=300).chat.completions.with_raw_response.create(
        model="fake-model", messages=user(QUESTION), extra_body=ORCHESTRATE
    )
    answer = raw.parse().choices[0].message.content or ""
    calls = {c["node"]: c for c in trace(server, raw.headers["x-toolgraph-trace-id"])["calls"]}
    assert [calls[n]["tool"] for n in ("s1", "s2", "s3")] == [
        "geo_find_entities",
        "geo_get_neighbors",
        "geo_argmax",
    ]
    assert all(call["outcome"] == "ok" for call in calls.values()), calls
    assert calls["s1"]["output"]["variable"] == "#0"
    assert calls["s2"]["attempts"] == 2  # the misspelt relation was refused, then fixed
    assert {e["name"] for e in calls["s2"]["output"]["entities"]} == {"France", "Portugal"}
    assert calls["s3"]["output"]["entities"][0]["name"] == "France"
    assert "France" in answer
    rewrites = [
        request.body["messages"]
        for request in upstream.requests
        if request.body and len(request.body.get("messages", [])) == 4
    ]
    (messages,) = rewrites
    assert json.loads(messages[2]["content"])["relation"] == GEO + "bordrs"
    assert (
        "relation 'http://example.org/geo/bordrs' does not lead from #0" in messages[3]["content"]
    )
