"""The LLM-free policy: per sub-task, in topological order, take the best candidate.

It makes no LLM call, so it is the planner's fallback when the model is unavailable
or misbehaves, and the baseline every LLM policy must beat. ``use_graph=False`` is the
retrieval-only baseline (every sub-task searched on its own). A tool already chosen
for another sub-task is passed over while an unused candidate remains: one request
rarely calls the same tool twice.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from proxy.plan.candidates import RERANK_DEPTH, CandidateFinder
from proxy.plan.model import Candidate, Decision, Plan, SubTask, topological
from proxy.plan.order import TextOrder
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


#: Partial plans kept by the joint search in ``rerank`` mode (1: greedy).
JOINT_WIDTH = 8


def plan_without_llm(
    finder: CandidateFinder,
    subtasks: Sequence[SubTask],
    vectors: Mapping[str, Vectors],
    k: int,
    *,
    use_graph: bool = True,
    beam: int = 0,
    width: int | None = None,
    order: TextOrder | None = None,
    exclude: frozenset[str] = frozenset(),
) -> Plan:
    """Tools in ``exclude`` are never picked (an earlier run of the request found them
    unable to run). ``beam``: how many runners-up of each needed sub-task's list also lend their
    neighbours (at a share of the bonus).

    ``width`` > 1 searches the picks jointly: the ``width`` best partial plans are kept
    per sub-task (in topological order), each extended by its ``width`` best unused
    candidates, and the plan whose picks' scores add up highest wins. It is meant for
    ``rerank`` mode, whose scores are log-odds (retrieval's rank prior plus edge
    evidence): an earlier pick that is retrieval's second but joined to the tools after
    it can then beat retrieval's first, where the greedy walk would have committed to
    the first and let the mistake propagate. Ties keep the greedy plan, so a graph
    without evidence leaves retrieval's picks as they are. Default: ``JOINT_WIDTH`` in
    ``rerank`` mode with the graph, else 1. Partial plans are compared by their score
    so far plus what the sub-tasks still open would score on retrieval's best unused
    tools (:func:`_rest`): otherwise a plan that spends retrieval's first tool early
    always leads, and one that keeps it for a later sub-task is cut before the evidence
    that favours it arrives.

    ``order``: where a sub-task shares its text with one it needs, the order of their
    tools' clauses in that text adds its evidence to the pick (:mod:`proxy.plan.order`).
    """
    joint = finder.mode == "rerank" and use_graph and finder.trust is not None
    if width is None:
        width = JOINT_WIDTH if joint else 1
    tasks = topological(subtasks)
    by_id = {task.id: task for task in subtasks}
    paths = [(0.0, Plan(list(subtasks), {}, "graph" if use_graph else "retrieval"))]
    for step_index, task in enumerate(tasks):
        grown: list[tuple[float, float, Plan]] = []
        for total, plan in paths:
            found = finder.find(
                task.text,
                vectors[task.id],
                k + len(exclude),
                after=chosen_tool_ids(plan, finder, task),
                beam=runners_up(plan, task, beam),
                category=task.category,
                use_graph=use_graph,
            )
            candidates = [c for c in found if c.tool not in exclude][:k]
            used = set(plan.choices.values())
            options = [c for c in candidates if c.tool not in used] or candidates[:1]
            if not options:
                plan.decisions.append(Decision(task.id, candidates, None, "no candidate at all"))
                grown.append((total, total, plan))
                continue
            for pick in options[:width]:
                step = Plan(plan.subtasks, dict(plan.choices), plan.policy)
                step.decisions = [*plan.decisions]
                step.choices[task.id] = pick.tool
                step.decisions.append(Decision(task.id, candidates, pick.tool, _reason(pick)))
                gain = pick.score
                if order is not None and use_graph:
                    gain += _order_nats(order, by_id, _chosen_ids(plan), task, pick.tool_id)
                rest = 0.0
                if joint:
                    rest = _rest(finder, tasks[step_index + 1 :], vectors, step, order, by_id)
                grown.append((total + gain, total + gain + rest, step))
        # Stable: among equal bounds (rounded against float noise) the greedy plan leads.
        grown.sort(key=lambda item: -round(item[1], 9))
        paths = [(total, plan) for total, _, plan in grown[:width]]
    return paths[0][1]


def _chosen_ids(plan: Plan) -> dict[str, str]:
    """The tool id chosen per sub-task, read from the decisions' own lists."""
    ids = {}
    for decision in plan.decisions:
        for candidate in decision.candidates:
            if candidate.tool == decision.chosen:
                ids[decision.subtask] = candidate.tool_id
                break
    return ids


def _order_nats(
    order: TextOrder,
    by_id: Mapping[str, SubTask],
    chosen: Mapping[str, str],
    task: SubTask,
    tool: str,
) -> float:
    """The order evidence between ``tool`` (an id) and the tools ``chosen`` for what
    ``task`` needs, counted only where the two sub-tasks share one text (else their
    texts already tell them apart)."""
    nats = 0.0
    for need in task.needs:
        before = chosen.get(need)
        if before is not None and by_id[need].text == task.text:
            nats += order.evidence(task.text, before, tool)
    return nats


def _rest(
    finder: CandidateFinder,
    tasks: Sequence[SubTask],
    vectors: Mapping[str, Vectors],
    plan: Plan,
    order: TextOrder | None,
    by_id: Mapping[str, SubTask],
) -> float:
    """What the sub-tasks still open would add in a greedy roll-out: each takes, of
    retrieval's first ``JOINT_WIDTH`` tools not used yet, the one with the best rank
    prior plus order evidence (edge evidence left out: it only adds). Without order
    evidence, every plan of the same tools on one text then has the same bound whatever
    their order; with it, a plan that keeps retrieval's first tool for a later sub-task
    is not cut before the evidence that favours it arrives."""
    assert finder.trust is not None
    used = set(plan.choices.values())
    chosen = _chosen_ids(plan)
    rest = 0.0
    for task in tasks:
        ranked = finder.retrieve(task.text, vectors[task.id], RERANK_DEPTH, task.category)
        options = [(i, c) for i, c in enumerate(ranked) if c.tool not in used][:JOINT_WIDTH]
        if not options:
            rest += finder.trust.prior(len(ranked))
            continue
        best, value = options[0][1], -math.inf
        for i, candidate in options:
            score = finder.trust.prior(i)
            if order is not None:
                score += _order_nats(order, by_id, chosen, task, candidate.tool_id)
            if score > value + 1e-9:
                best, value = candidate, score
        used.add(best.tool)
        chosen[task.id] = best.tool_id
        rest += value
    return rest


def _reason(pick: Candidate) -> str:
    if pick.source == "graph" and pick.edge is not None:
        return (
            f"best score {pick.score:.3f}: similarity {pick.similarity:.3f} and a "
            f"{pick.edge.value} edge (weight {pick.weight:.2f}) from the tool before"
        )
    if pick.source == "learned":
        return f"best score {pick.score:.3f}: this client's runs went to it after {pick.via}"
    return f"best {pick.source} match (similarity {pick.similarity:.3f})"
