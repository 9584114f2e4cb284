"""What one answered request teaches, as counts to add to its tenant's learned state.

A count is keyed ``(kind, a, b)`` and holds two numbers, ``(good, bad)``:

* ``edge``, ``(A, B)``: B ran on the output of A (A succeeded first); good when B's
  call succeeded, bad when it failed or timed out. A call that waits on the user, was
  skipped or cancelled says nothing about the edge and is not counted.
* ``pick``, ``(chosen, beaten)``: the tool the plan kept for a sub-task and each other
  candidate shown beside it; good when the chosen call succeeded, bad when it failed.
* ``select``, ``(tool, "")``: a tool select mode forwarded; good when the model called
  it, bad when it did not.
* ``served``, ``(tool, query)``: the sub-task text a kept tool served (the query its
  candidate list was searched with); good when the call succeeded, bad when it failed.
  Each candidate shown *above* a kept tool whose call succeeded is a weak negative for
  that query (bad): retrieval preferred it, the plan did not. Read by retrieval
  (:mod:`.traffic`).

Names and queries are masked as plan memory masks its texts
(:func:`proxy.masking.mask_secrets`): select mode's tool names are the client's own words.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Literal

from proxy.execute.scheduler import Outcome, PlanRun
from proxy.masking import mask_secrets
from proxy.plan.model import Decision, Plan

Kind = Literal["edge", "pick", "select", "served"]
KINDS: tuple[Kind, ...] = ("edge", "pick", "select", "served")
Key = tuple[Kind, str, str]
#: (good, bad) observations.
Count = tuple[int, int]

_GOOD = frozenset({Outcome.OK})
_BAD = frozenset({Outcome.FAILED, Outcome.TIMEOUT})


def feedback_of_run(plan: Plan, run: PlanRun, secrets: Sequence[str] = ()) -> dict[Key, Count]:
    """The counts one orchestrated run adds: its executed edges, its kept picks and the
    queries its kept tools served."""
    counts: Counter[tuple[Key, bool]] = Counter()
    records = run.records
    for record in records.values():
        verdict = _verdict(record.outcome)
        if verdict is None:
            continue
        for need in record.node.dependencies:
            before = records.get(need)
            if before is not None and before.outcome is Outcome.OK:
                counts[(("edge", before.node.tool, record.node.tool), verdict)] += 1
    for decision in plan.decisions:
        chosen = plan.choices.get(decision.subtask)
        kept = records.get(decision.subtask)
        if decision.kind != "pick" or decision.chosen != chosen or kept is None:
            continue
        verdict = _verdict(kept.outcome)
        if verdict is None or chosen is None:
            continue
        for candidate in decision.candidates:
            if candidate.tool != chosen:
                counts[(("pick", chosen, candidate.tool), verdict)] += 1
        counts.update(_served(plan, decision, chosen, verdict))
    return _masked(counts, secrets)


def _served(
    plan: Plan, decision: Decision, chosen: str, verdict: bool
) -> Counter[tuple[Key, bool]]:
    """The query a kept tool served, and (when it succeeded) the tools shown above it."""
    text = next((t.text for t in plan.subtasks if t.id == decision.subtask), "")
    counts: Counter[tuple[Key, bool]] = Counter()
    if not text:
        return counts
    counts[(("served", chosen, text), verdict)] += 1
    shown = [c.tool for c in decision.candidates]
    if verdict and chosen in shown:
        for beaten in shown[: shown.index(chosen)]:
            counts[(("served", beaten, text), False)] += 1
    return counts


def feedback_of_select(
    forwarded: Iterable[str], called: Iterable[str], secrets: Sequence[str] = ()
) -> dict[Key, Count]:
    """The counts one select-mode reply adds: each forwarded tool, called or not."""
    used = set(called)
    counts: Counter[tuple[Key, bool]] = Counter()
    for tool in dict.fromkeys(forwarded):
        counts[(("select", tool, ""), tool in used)] += 1
    return _masked(counts, secrets)


def _verdict(outcome: Outcome | None) -> bool | None:
    if outcome in _GOOD:
        return True
    if outcome in _BAD:
        return False
    return None


def _masked(counts: Mapping[tuple[Key, bool], int], secrets: Sequence[str]) -> dict[Key, Count]:
    merged: dict[Key, Count] = {}
    for ((kind, a, b), good), n in counts.items():
        key: Key = (kind, mask_secrets(a, secrets), mask_secrets(b, secrets))
        held = merged.get(key, (0, 0))
        merged[key] = (held[0] + n, held[1]) if good else (held[0], held[1] + n)
    return merged
