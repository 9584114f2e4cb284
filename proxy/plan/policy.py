"""The LLM-free policy: per sub-task, in topological order, take the best candidate.

It makes no LLM call, so it is the planner's fallback when the model is unavailable
or misbehaves, and the baseline every LLM policy must beat. ``use_graph=False`` is the
retrieval-only baseline (every sub-task searched on its own). A tool already chosen
for another sub-task is passed over while an unused candidate remains: one request
rarely calls the same tool twice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from proxy.plan.candidates import CandidateFinder
from proxy.plan.model import Candidate, Decision, Plan, SubTask, topological
from retriever.embedder import Encoder, Vectors


def embed_subtasks(encoder: Encoder, subtasks: Sequence[SubTask]) -> dict[str, Vectors]:
    vectors = encoder.encode([task.text for task in subtasks])
    return {task.id: vectors[i] for i, task in enumerate(subtasks)}


def best_candidate(candidates: Sequence[Candidate], used: set[str]) -> Candidate | None:
    """The first candidate not used yet (the list is best first), else the first."""
    fresh = [c for c in candidates if c.tool not in used] or list(candidates)
    return fresh[0] if fresh else None


def chosen_tool_ids(plan: Plan, finder: CandidateFinder, task: SubTask) -> list[str]:
    ids = []
    for need in task.needs:
        name = plan.choices.get(need)
        tool = finder.store.get_tool(name) if name else None
        if tool is not None:
            ids.append(tool.id)
    return ids


def runners_up(plan: Plan, task: SubTask, beam: int) -> list[str]:
    """The ids of the best ``beam`` candidates not chosen for each sub-task ``task`` needs."""
    if beam <= 0:
        return []
    shown = {d.subtask: d for d in plan.decisions if d.kind in ("pick", "fallback")}
    ids: list[str] = []
    for need in task.needs:
        decision = shown.get(need)
        if decision is not None:
            ids += [c.tool_id for c in decision.candidates if c.tool != decision.chosen][:beam]
    return ids


def plan_without_llm(
    finder: CandidateFinder,
    subtasks: Sequence[SubTask],
    vectors: Mapping[str, Vectors],
    k: int,
    *,
    use_graph: bool = True,
    beam: int = 0,
) -> Plan:
    """``beam``: how many runners-up of each needed sub-task's list also lend their
    neighbours (at a share of the bonus)."""
    plan = Plan(list(subtasks), {}, "graph" if use_graph else "retrieval")
    for task in topological(subtasks):
        after = chosen_tool_ids(plan, finder, task)
        candidates = finder.find(
            task.text,
            vectors[task.id],
            k,
            after=after,
            beam=runners_up(plan, task, beam),
            category=task.category,
            use_graph=use_graph,
        )
        pick = best_candidate(candidates, set(plan.choices.values()))
        if pick is None:
            plan.decisions.append(Decision(task.id, candidates, None, "no candidate at all"))
            continue
        plan.choices[task.id] = pick.tool
        plan.decisions.append(Decision(task.id, candidates, pick.tool, _reason(pick)))
    return plan


def _reason(pick: Candidate) -> str:
    if pick.source == "graph" and pick.edge is not None:
        return (
            f"best score {pick.score:.3f}: similarity {pick.similarity:.3f} and a "
            f"{pick.edge.value} edge (weight {pick.weight:.2f}) from the tool before"
        )
    return f"best {pick.source} match (similarity {pick.similarity:.3f})"
