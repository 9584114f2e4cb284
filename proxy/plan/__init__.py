"""Orchestrate mode's planner: sub-tasks in, a tool DAG out (DESIGN.md §1, steps 1-2)."""
