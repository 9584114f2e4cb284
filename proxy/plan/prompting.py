"""The planner's prompts, read from files, and its way of giving up."""

from __future__ import annotations

from pathlib import Path

_PROMPTS = Path(__file__).parent / "prompts"


def prompt(name: str) -> str:
    return (_PROMPTS / f"{name}.md").read_text(encoding="utf-8")


class PlanningFailed(Exception):
    """The model's answers could not be made into a plan; the planner degrades."""
