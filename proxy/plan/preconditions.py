"""A plan's steps checked against their tools' preconditions, repaired or refused.

A pack declares what its tools need from earlier calls as STRONG_DEP edges of origin
``pack:…`` (the knowledge-graph pack's: ``get_neighbors`` needs a ``variable`` from a
call that makes one and ``relations`` from ``get_relations``; ``argmax`` needs
``attributes`` from ``get_attributes``). Each resource a step's tool needs must come
from a step before it (among what it needs, directly or through other steps) whose
tool is one of the edges' sources. When it does not, at plan time rather than when the
tool refuses the call:

* *repaired* when the fix is certain: a provider found only through another step
  becomes a direct need (so the plan binds its output, not the writer), and a missing
  resource that exactly one tool gives, and whose own needs the step's earlier steps
  meet, gets a step of its own inserted before it (``get_relations`` before a
  ``get_neighbors`` that lacks one);
* *started*: a resource several tools give, of which exactly one needs nothing itself
  (a variable, which only ``find_entities`` makes from nothing), missing before a
  step of a decomposed plan: the plan's chain has no start, and that tool is
  inserted as one, its argument written from the step's text like any other (a step
  "the countries that border Germany" gets ``find_entities`` before it, and the
  writer reads "Germany" there);
* *refused* otherwise: the step loses its tool, so the executor never calls it, and a
  step needing it is checked without it, in order. A plan of one step standing for
  the whole request is checked without starts (``starts=False``): a count with no
  set before it says the request is a chain, which the planner then decomposes,
  rather than a count of one entity found.

Every repair and refusal is one line of ``plan.notes``, which the request trace keeps.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from graph_store.models import EdgeKind
from graph_store.store import GraphStore
from proxy.plan.model import Plan, SubTask, topological

log = logging.getLogger(__name__)

#: Edges of these origins are preconditions; other STRONG_DEP edges (learned, imported)
#: only suggest an order.
PACK_ORIGIN = "pack:"


def enforce_preconditions(plan: Plan, store: GraphStore, *, starts: bool = True) -> dict[str, str]:
    """Repair or refuse, in place, every step whose tool's preconditions do not hold
    (blocking: the store is read; the planner runs it in a worker thread); the refused
    steps with the tool each lost. ``starts``: a missing start of a chain may be
    inserted. A plan already checked is left as it is."""
    refused: dict[str, str] = {}
    for step in [task.id for task in topological(plan.subtasks)]:
        tool = plan.choices.get(step)
        if tool is None:
            continue
        needs = preconditions(store, tool)
        # What many tools give (a variable) first: without it nothing else can be inserted.
        for resource in sorted(needs, key=lambda r: len(needs[r]), reverse=True):
            if not _meet(plan, store, step, resource, needs[resource], starts):
                _refuse(plan, step, resource, needs[resource])
                refused[step] = tool
                break
    return refused


def preconditions(store: GraphStore, name: str) -> dict[str, set[str]]:
    """What the tool ``name`` needs: each resource with the tools that give it."""
    tool = store.get_tool(name)
    if tool is None:
        return {}
    needs: dict[str, set[str]] = {}
    for edge, source in store.edge_rows([tool.id], [EdgeKind.STRONG_DEP], "in"):
        if edge.origin.startswith(PACK_ORIGIN) and edge.resource:
            needs.setdefault(edge.resource, set()).add(source.name)
    return needs


def _meet(
    plan: Plan, store: GraphStore, step: str, resource: str, providers: set[str], starts: bool
) -> bool:
    """Whether ``resource`` reaches ``step`` now, after the one certain repair if any."""
    found = _provider(plan, step, providers)
    if found is not None:
        if found not in _bridged(plan, step):
            _add_need(plan, step, found)
            via = f"{found} ({plan.choices[found]})"
            _note(plan, f"{step} ({plan.choices[step]}) now reads the {resource} of {via} directly")
        return True
    if len(providers) == 1:
        return _insert(plan, store, step, resource, next(iter(providers)))
    starters = [tool for tool in sorted(providers) if not preconditions(store, tool)]
    if starts and len(starters) == 1:
        return _insert(plan, store, step, resource, starters[0], "the start of its chain")
    return False


def _insert(
    plan: Plan, store: GraphStore, step: str, resource: str, provider: str, role: str = ""
) -> bool:
    """A step calling ``provider`` before ``step``, if its own needs are met before it
    (``role``: what the inserted step is, for the note)."""
    sources = {}
    for need, givers in preconditions(store, provider).items():
        found = _provider(plan, step, givers)
        if found is None:
            return False
        sources[need] = found
    task = _task(plan, step)
    added = SubTask(
        id=_free_id(plan, f"{step}_{resource}"),
        text=f"Get the {resource} that this step needs: {task.text}",
        category=task.category,
        needs=tuple(dict.fromkeys(sources.values())),
    )
    plan.subtasks.insert(plan.subtasks.index(task), added)
    plan.choices[added.id] = provider
    _add_need(plan, step, added.id)
    what = f"{step} ({plan.choices[step]}) needs {resource} from {provider}"
    as_what = f" as {role}" if role else ""
    _note(plan, f"{what}, which no step before it called: inserted {added.id}{as_what}")
    return True


def _refuse(plan: Plan, step: str, resource: str, providers: set[str]) -> None:
    tool = plan.choices.pop(step)
    givers = ", ".join(sorted(providers))
    why = f"it needs {resource} from one of {givers}, and no step before it calls one"
    _note(plan, f"refused {tool} for {step}: {why}")


def _provider(plan: Plan, step: str, providers: set[str]) -> str | None:
    """The nearest earlier step ``step`` needs (directly or through others) whose tool
    is one of ``providers``."""
    by_id: Mapping[str, SubTask] = {task.id: task for task in plan.subtasks}
    queue, seen = list(by_id[step].needs), {step}
    while queue:
        current = queue.pop(0)
        if current in seen or current not in by_id:
            continue
        seen.add(current)
        if plan.choices.get(current) in providers:
            return current
        queue += by_id[current].needs
    return None


def _bridged(plan: Plan, step: str) -> set[str]:
    """The steps ``step`` takes outputs from: its needs, a need without a tool replaced
    by what that one needs (as :meth:`Plan.tool_plan` bridges them)."""
    by_id: Mapping[str, SubTask] = {task.id: task for task in plan.subtasks}
    found: set[str] = set()
    queue, seen = list(by_id[step].needs), set()
    while queue:
        current = queue.pop(0)
        if current in seen or current not in by_id:
            continue
        seen.add(current)
        if current in plan.choices:
            found.add(current)
        else:
            queue += by_id[current].needs
    return found


def _task(plan: Plan, step: str) -> SubTask:
    return next(task for task in plan.subtasks if task.id == step)


def _add_need(plan: Plan, step: str, need: str) -> None:
    index = next(i for i, task in enumerate(plan.subtasks) if task.id == step)
    task = plan.subtasks[index]
    plan.subtasks[index] = task.model_copy(update={"needs": (*task.needs, need)})


def _free_id(plan: Plan, wanted: str) -> str:
    taken = {task.id for task in plan.subtasks}
    candidate, n = wanted, 2
    while candidate in taken:
        candidate, n = f"{wanted}{n}", n + 1
    return candidate


def _note(plan: Plan, text: str) -> None:
    log.info("precondition: %s", text)
    plan.notes.append(f"precondition: {text}")
