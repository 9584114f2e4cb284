"""A fake LLM for orchestrate mode: it answers each of the proxy's prompts by what it asks.

The fake upstream's responder (:attr:`testing.fake_upstream.FakeUpstream.responder`)
in the orchestrate tests and in the load benchmark: it tells the proxy's stages
apart by their system prompts (triage, decompose, pick, arguments, reflect, answer) and
answers each as scripted.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

from testing.fake_upstream import Script

RESULT = re.compile(r'<result id="([^"]+)">\n(.*?)\n</result>', re.DOTALL)
_STAGES = {
    "You write the arguments": "arguments",
    "You answer the user's last message": "answer",
    "You plan how to answer": "decompose",
    "You choose the tool for one step": "pick",
    "You check a plan": "reflect",
    "You decide which fields": "fields",
    "You sort requests by how many tool calls": "triage",
}


@dataclass
class Brain:
    """The upstream model, scripted per prompt: which stage asks, and about what.

    ``arguments`` maps a phrase of a sub-task to the JSON the argument writer gets;
    ``plan`` is the decomposition (LLM policy), ``tools`` the tool each sub-task's
    pick names (by a phrase of the sub-task). The answer quotes every result it was
    shown, so a test can see what reached the answering call. ``remember=False``
    keeps no prompts (a long benchmark would hold every one of them).
    """

    arguments: dict[str, Any] = field(default_factory=dict)
    plan: dict[str, Any] | None = None
    tools: dict[str, str] = field(default_factory=dict)
    answer_script: Script | None = None
    asked: Counter[str] = field(default_factory=Counter)
    prompts: list[tuple[str, str]] = field(default_factory=list)  # (stage, user message)
    remember: bool = True
    # The tokens each stage's answers report (prompt, completion), instead of words counted
    usage: dict[str, tuple[int, int]] = field(default_factory=dict)
    sort: str = "several"  # the triage's one-word answer (planner.triage)

    def one_step(self, step: str, phrase: str, tool: str, arguments: dict[str, Any]) -> None:
        """A plan of one sub-task, ``step``: its pick is ``tool`` and its arguments
        ``arguments`` (both found by a ``phrase`` of the step)."""
        self.plan = plan_of((step, []))
        self.tools = {phrase: tool}
        self.arguments = {phrase: arguments}

    def __call__(self, request: dict[str, Any]) -> Script | None:
        messages = request.get("messages") or []
        system = str(messages[0].get("content") or "") if messages else ""
        stage = stage_of(system)
        script = self._script(request, stage, system)
        if stage in self.usage:
            return replace(script or Script(), usage=self.usage[stage])
        return script

    def _script(self, request: dict[str, Any], stage: str, system: str) -> Script | None:
        messages = request.get("messages") or []
        user = str(messages[1].get("content") or "") if len(messages) > 1 else ""
        self.asked[stage] += 1
        if self.remember:
            self.prompts.append((stage, user if stage != "answer" else system))
        if stage == "arguments":
            task = re.search(r"Sub-task: (.*)", user)
            return json_script(self.arguments_for(task.group(1) if task else ""))
        if stage == "decompose":
            plan = self.decomposition(user)
            return None if plan is None else json_script(plan)
        if stage == "pick":
            return json_script({"choice": self._pick(user), "reason": "scripted"})
        if stage == "reflect":
            return json_script({"verdict": "success", "reason": "scripted"})
        if stage == "answer":
            return self.answer(request, system)
        if stage == "triage":
            return Script(text=self.sort)
        return None

    def decomposition(self, conversation: str) -> dict[str, Any] | None:
        """The plan for a request's ``conversation`` (the decompose prompt's user part)."""
        return self.plan

    def arguments_for(self, task: str) -> Any:
        """The arguments the model writes for sub-task ``task``."""
        for phrase, arguments in self.arguments.items():
            if phrase in task:
                return arguments
        return {"missing": ["expression"], "question": "Which expression?"}

    def answer(self, request: dict[str, Any], system: str) -> Script:
        """The final answer: every result the answering prompt showed, quoted."""
        if self.answer_script is not None:
            return self.answer_script
        results = "; ".join(f"{i}={text}" for i, text in RESULT.findall(system))
        return Script(text=f"Answer from the results: {results or 'none'}")

    def _pick(self, user: str) -> int:
        step = re.search(r"Step (\S+): (.*)", user)
        listed = dict(re.findall(r"^(\d+)\. ([\w-]+)", user, re.MULTILINE))
        wanted = next(
            (tool for phrase, tool in self.tools.items() if step and phrase in step.group(2)),
            None,
        )
        return next((int(n) for n, name in listed.items() if name == wanted), 0)


def stage_of(system: str) -> str:
    """Which of the proxy's prompts a system message opens; any other first message is
    the answering call's too (the client's own messages, when no tool ran)."""
    return next((stage for start, stage in _STAGES.items() if system.startswith(start)), "answer")


def json_script(value: object) -> Script:
    return Script(text=json.dumps(value))


def plan_of(*steps: tuple[str, list[str]]) -> dict[str, Any]:
    """A decomposition: (sub-task text, needs) per step, ids s1, s2, …, any category."""
    return {
        "subtasks": [
            {"id": f"s{i}", "text": text, "needs": needs}
            for i, (text, needs) in enumerate(steps, 1)
        ]
    }
