"""Learning's fixtures: orchestrate mode's scripted LLM (the gate off), as the tenancy
tests; the planning tests' small travel catalog, its index and the real small model."""

from __future__ import annotations

from tests.orchestrate.conftest import _no_gate, brain
from tests.plan.conftest import dataset, encoder, index, taskbench_dir

__all__ = ["_no_gate", "brain", "dataset", "encoder", "index", "taskbench_dir"]
