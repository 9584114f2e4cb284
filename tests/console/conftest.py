"""The console's tests use orchestrate mode's fixtures: the scripted fake LLM, local
HTTP tools, and the no-tool gate off."""

from tests.orchestrate.conftest import _no_gate, brain, local_tools

__all__ = ["_no_gate", "brain", "local_tools"]
