"""Step 2 with an LLM: depth-first selection with backtracking, then reflection.

Sub-tasks are visited in topological order. For each, the model sees a numbered list
of candidates (the list is the whole output space: it cannot name a tool that does not
exist) and answers a number, or 0 for "none fits". "None fits" for a dependent
sub-task is a dead end: the walk backtracks to the latest sub-task it needs, excludes
the tool chosen there, and chooses again; for a sub-task that needs nothing, it is
left without a tool. Every ask and every backtrack spends one step of the budget;
when the budget is spent the sub-tasks left are filled by the LLM-free policy.

When the walk ends, the model reflects (``prompts/reflect.md``): *success* keeps the
path; *partial* names the first wrong step: the steps before it stay, its tool is
excluded and the walk resumes there with the reason in context; *failure* names
noisy start tools: they are excluded everywhere and the walk starts again. Bounded
rounds. Short-term memory (the path so far with the reason of every move) and the
long-term examples go into every prompt.

The walk reads the graph store and the index (synchronous; Neo4j over the network)
between two questions to the model: each step's reading (the candidates and their
descriptions) is one hop to a worker thread, so the event loop never waits on it.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from pydantic import JsonValue

from proxy.llm import Message, MeteredModel, parse_object
from proxy.plan.candidates import CandidateFinder
from proxy.plan.model import Candidate, Decision, Plan, SubTask, topological
from proxy.plan.policy import best_candidate, chosen_tool_ids, runners_up
from proxy.plan.prompting import prompt
from retriever.embedder import Vectors

PickMode = Literal["llm", "confident", "first"]
#: Tokens of one pick: a one-sentence reason and a number fit in 40; unbounded, a 1.5B
#: model wrote a 184-token reason (351 s on a busy machine, in an end-to-end trace).
PICK_TOKENS = 64
_CHOICE = re.compile(r'"choice"\s*:\s*(\d+)')
_REASON = re.compile(r'"reason"\s*:\s*"((?:[^"\\]|\\.)*)')


@dataclass
class Walk:
    """The state of one search: choices, exclusions, the budget, the notes so far."""

    plan: Plan
    budget: int
    excluded: dict[str, set[str]] = field(default_factory=dict)  # sub-task → tools
    noise: set[str] = field(default_factory=set)  # tools excluded everywhere
    #: sub-task → tools an earlier run of the request could not run for it (kept through
    #: the walk's own backtracks, which reset ``excluded``)
    blocked: Mapping[str, frozenset[str]] = field(default_factory=dict)
    lessons: list[str] = field(default_factory=list)  # reflection reasons


class DepthFirstSearch:
    def __init__(
        self,
        finder: CandidateFinder,
        model: MeteredModel,
        k: int,
        *,
        beam: int = 0,
        examples: Mapping[str, Sequence[str]] | None = None,
        pick: PickMode = "llm",
        margin: float = 0.05,
    ) -> None:
        self.finder = finder
        self.model = model
        self.k = k
        self.beam = beam
        self.examples = examples or {}
        self.pick = pick
        self.margin = margin

    async def walk(
        self, request: str, walk: Walk, vectors: Mapping[str, Vectors], start: int = 0
    ) -> None:
        """Choose tools for the sub-tasks from position ``start`` of the topological order."""
        order = topological(walk.plan.subtasks)
        position = {task.id: i for i, task in enumerate(order)}
        i = start
        while i < len(order):
            task = order[i]
            if walk.budget <= 0:
                await asyncio.to_thread(self._fill_without_llm, walk, order[i:], vectors)
                return
            candidates, descriptions = await asyncio.to_thread(
                self._shown, walk, task, vectors[task.id]
            )
            pick, reason = await self._ask(request, walk, task, candidates, descriptions)
            walk.budget -= 1
            if pick is not None:
                walk.plan.choices[task.id] = pick.tool
                walk.plan.decisions.append(Decision(task.id, candidates, pick.tool, reason))
                i += 1
                continue
            walk.plan.decisions.append(Decision(task.id, candidates, None, reason))
            back = max((position[n] for n in task.needs if n in walk.plan.choices), default=None)
            if back is None:
                i += 1  # nothing to go back to: this sub-task stays without a tool
                continue
            undone = order[back]
            tool = walk.plan.choices[undone.id]
            walk.excluded.setdefault(undone.id, set()).add(tool)
            for later in order[back:]:
                walk.plan.choices.pop(later.id, None)
                if later.id != undone.id:
                    walk.excluded.pop(later.id, None)
            walk.plan.decisions.append(
                Decision(
                    undone.id, [], None, f"backtrack: no tool fits {task.id} after {tool}",
                    kind="backtrack",
                )
            )  # fmt: skip
            walk.budget -= 1
            i = back

    def _shown(
        self, walk: Walk, task: SubTask, vector: Vectors
    ) -> tuple[list[Candidate], dict[str, str]]:
        """The candidates offered for ``task`` and their descriptions by tool id
        (store reads: called in a worker thread)."""
        candidates = self._candidates(walk, task, vector)
        descriptions = {}
        for c in candidates:
            tool = self.finder.store.get_tool(c.tool_id)
            descriptions[c.tool_id] = tool.description[:300] if tool else ""
        return candidates, descriptions

    def _candidates(self, walk: Walk, task: SubTask, vector: Vectors) -> list[Candidate]:
        banned = walk.noise | walk.excluded.get(task.id, set()) | walk.blocked.get(task.id, set())
        after = chosen_tool_ids(walk.plan, self.finder, task)
        found = self.finder.find(
            task.text,
            vector,
            self.k + len(banned),
            after=after,
            beam=runners_up(walk.plan, task, self.beam),
            category=task.category,
        )
        return [c for c in found if c.tool not in banned][: self.k]

    async def _ask(
        self,
        request: str,
        walk: Walk,
        task: SubTask,
        candidates: Sequence[Candidate],
        descriptions: Mapping[str, str],
    ) -> tuple[Candidate | None, str]:
        if not candidates:
            return None, "no candidate left"
        if self.pick != "llm" and (sure := self._without_asking(candidates)):
            return candidates[0], sure
        context = self._context(request, walk, task, candidates, descriptions)
        messages: list[Message] = [
            {"role": "system", "content": prompt("pick")},
            {"role": "user", "content": context},
        ]
        reply = await self.model.reply(
            messages, max_tokens=PICK_TOKENS, json=True, purpose="pick", about=task.id
        )
        used = set(walk.plan.choices.values())
        return read_choice(reply.text, candidates, cut=reply.truncated, used=used)

    def _without_asking(self, candidates: Sequence[Candidate]) -> str:
        """Why the first candidate is taken without an LLM call, or "" to ask.

        ``confident``: the first of the list (retrieval's hybrid order, edges included)
        is also the most similar to the sub-task, by ``margin``: the two rankings agree.
        A list of one has no second ranking to agree with, so the model is asked: a
        category filter that left only ``run_simulation`` for a "physics" step made it
        confident at similarity 0.06 (in the end-to-end traces of a 1.5B model).

        There is no floor on the similarity: a whole question is far from any tool's
        text, and the right confident picks of the e2e suite's one-tool questions (its
        default suite and its dev part, at 100 tools) lie at 0.2 to 0.55, 12 of 15 under
        0.5, all 15 right; a floor that would have sent a 0.53 pick to the model (a
        division given to ``vector_operation``) asks the model about them all. On
        UltraTool's gold root steps, confident picks are right 50 % of the time under
        0.5 and 88 % from 0.6 (``python -m eval.plan_confident``; README, "How well
        it selects"): the model's own pick there is not measured, so no floor is
        shown to help.
        """
        first = candidates[0]
        if self.pick == "first":
            return f"the first candidate, taken without asking (similarity {first.similarity:.3f})"
        if len(candidates) < 2:
            return ""
        others = max(c.similarity for c in candidates[1:])
        if first.similarity - others < self.margin:
            return ""
        return (
            f"the first candidate, confident: similarity {first.similarity:.3f}, "
            f"every other at most {others:.3f}"
        )

    def _context(
        self,
        request: str,
        walk: Walk,
        task: SubTask,
        candidates: Sequence[Candidate],
        descriptions: Mapping[str, str],
    ) -> str:
        lines = [f"<request>\n{request}\n</request>", "", "Path so far (short-term memory):"]
        for decision in walk.plan.decisions:
            chosen = decision.chosen or "(none)"
            lines.append(f"- {decision.kind} {decision.subtask}: {chosen}: {decision.reason}")
        if not walk.plan.decisions:
            lines.append("- (nothing chosen yet)")
        lines += [f"Lesson from an earlier attempt: {lesson}" for lesson in walk.lessons]
        for text, path in self.examples.items():
            lines.append(f"A past success: {json.dumps(text)} was done with {' -> '.join(path)}")
        lines += ["", f"Step {task.id}: {task.text}", "", "Tools:"]
        for number, c in enumerate(candidates, 1):
            how = f" [{c.edge.value} from the earlier tool]" if c.edge is not None else ""
            lines.append(f"{number}. {c.tool}{how}: {descriptions[c.tool_id]}")
        lines.append("0. none of these fits")
        return "\n".join(lines)

    def _fill_without_llm(
        self, walk: Walk, tasks: Sequence[SubTask], vectors: Mapping[str, Vectors]
    ) -> None:
        for task in tasks:
            candidates = self._candidates(walk, task, vectors[task.id])
            pick = best_candidate(candidates, set(walk.plan.choices.values()))
            if pick is not None:
                walk.plan.choices[task.id] = pick.tool
            walk.plan.decisions.append(
                Decision(
                    task.id, candidates, pick.tool if pick else None,
                    "step budget spent: best-scored candidate", kind="fallback",
                )
            )  # fmt: skip


def read_pick(text: str) -> tuple[JsonValue, str]:
    """The number and the reason of a pick reply; a reply cut at its token bound still
    gives its number when it wrote one (the reason comes first and runs long)."""
    data = parse_object(text)
    if data is not None:
        return data.get("choice"), str(data.get("reason", ""))
    number = _CHOICE.search(text)
    reason = _REASON.search(text)
    return (
        int(number.group(1)) if number else None,
        reason.group(1) if reason else text.strip(),
    )


def read_choice(
    text: str, candidates: Sequence[Candidate], *, cut: bool = False, used: set[str] | None = None
) -> tuple[Candidate | None, str]:
    """The candidate a pick reply chooses, and why; None for "none fits".

    Only a number 0 is "none fits". A reply without a number gives the tool its reason
    names; a reply ``cut`` at its bound before its number (the reason ran long) never
    counts as "none": the first tool its reason names, else the best-scored candidate not
    ``used`` yet (the LLM-free policy's pick), since nothing in it says that none fits.
    """
    choice, reason = read_pick(text)
    if isinstance(choice, int) and not isinstance(choice, bool):
        if 1 <= choice <= len(candidates):
            return named_pick(reason, candidates, candidates[choice - 1])
        if choice == 0:
            return None, f"none fits: {reason}" if reason else "none fits"
    named = tools_named(reason, candidates)
    if len(named) == 1 or (cut and named):
        return named[0], f"{reason} (no number; the reason names {named[0].tool})"
    if cut and (best := best_candidate(candidates, used or set())) is not None:
        return best, f"{reason} (cut before its number: the best-scored candidate, {best.tool})"
    return None, "the model's answer named no listed tool: treated as none fits"


def named_pick(
    reason: str, candidates: Sequence[Candidate], numbered: Candidate
) -> tuple[Candidate, str]:
    """The tool the reason names when it names exactly one listed tool and the number
    points at another: a small model's number drifts from the tool it reasons about
    (5 of 10 wrong picks in the end-to-end traces of a 1.5B model), its reason much less."""
    named = tools_named(reason, candidates)
    if len(named) == 1 and named[0].tool != numbered.tool:
        return named[0], f"{reason} (the reason names {named[0].tool}; the number {numbered.tool})"
    return numbered, reason or "chosen by the model"


def tools_named(reason: str, candidates: Sequence[Candidate]) -> list[Candidate]:
    """The candidates ``reason`` names, in the order it names them; a name's underscores
    may be written as spaces or hyphens, in any case ("Flight search" for flight_search).
    A name followed by a negation ("the calculate_integral tool is not suitable", "X
    cannot") is a tool the reason turns down, not one it names: a 1.5B model's reason
    rejected the one tool it mentioned and the pick took that tool over its number."""
    found = []
    for candidate in candidates:
        words = (re.escape(part) for part in candidate.tool.split("_"))
        name = rf"(?<!\w){'[ _-]?'.join(words)}(?!\w)"
        mentions = list(re.finditer(name, reason, re.IGNORECASE))
        kept = [at for at in mentions if not _REJECTED.match(reason, at.end())]
        if kept:
            found.append((kept[0].start(), candidate))
    return [candidate for _, candidate in sorted(found, key=lambda pair: pair[0])]


#: What follows a tool's name in a reason that turns the tool down.
_REJECTED = re.compile(
    r"[`'\"]?(?:\s+(?:tool|function))?\s+(?:is|are|would be|does|do|will|can|could)?\s*"
    r"(?:not\b|n't\b)|[`'\"]?(?:\s+(?:tool|function))?\s+(?:cannot|can't|isn't|won't)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Verdict:
    kind: str  # success, partial, failure, unreadable
    reason: str = ""
    first_wrong: str = ""
    noise: tuple[str, ...] = ()


async def reflect(model: MeteredModel, request: str, plan: Plan) -> Verdict:
    steps = [
        f"- {task.id}: {task.text} -> {plan.choices.get(task.id, '(no tool)')}"
        for task in topological(plan.subtasks)
    ]
    messages: list[Message] = [
        {"role": "system", "content": prompt("reflect")},
        {
            "role": "user",
            "content": f"<request>\n{request}\n</request>\n\nSteps:\n" + "\n".join(steps),
        },
    ]
    data = await model.ask_object(messages, max_tokens=300, purpose="reflect")
    if data is None:
        return Verdict("unreadable")
    kind = str(data.get("verdict", ""))
    reason = str(data.get("reason", ""))
    if kind == "partial" and str(data.get("first_wrong", "")) in {t.id for t in plan.subtasks}:
        return Verdict("partial", reason, first_wrong=str(data["first_wrong"]))
    noise = data.get("noise")
    if kind == "failure" and isinstance(noise, list):
        return Verdict("failure", reason, noise=tuple(str(n) for n in noise))
    if kind == "success":
        return Verdict("success", reason)
    return Verdict("unreadable", reason)


async def search_with_reflection(
    search: DepthFirstSearch,
    request: str,
    plan: Plan,
    vectors: Mapping[str, Vectors],
    *,
    budget: int,
    rounds: int,
    exclude: frozenset[str] = frozenset(),
    blocked: Mapping[str, frozenset[str]] | None = None,
) -> Walk:
    """The walk and its reflection rounds; tools in ``exclude`` are never offered, those
    ``blocked`` names for a sub-task never for that one."""
    walk = Walk(plan, budget, noise=set(exclude), blocked=blocked or {})
    await search.walk(request, walk, vectors)
    order = topological(plan.subtasks)
    for _ in range(rounds):
        verdict = await reflect(search.model, request, plan)
        plan.decisions.append(
            Decision("", [], None, f"reflection: {verdict.kind}: {verdict.reason}", kind="reflect")
        )
        if verdict.kind in ("success", "unreadable") or walk.budget <= 0:
            break
        walk.lessons.append(verdict.reason or verdict.kind)
        if verdict.kind == "partial":
            start = next(i for i, t in enumerate(order) if t.id == verdict.first_wrong)
            wrong = plan.choices.get(verdict.first_wrong)
            if wrong:
                walk.excluded.setdefault(verdict.first_wrong, set()).add(wrong)
            for later in order[start:]:
                plan.choices.pop(later.id, None)
        else:
            start = 0
            walk.noise.update(verdict.noise)
            plan.choices.clear()
        await search.walk(request, walk, vectors, start)
    return walk
