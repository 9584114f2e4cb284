"""``toolgraph eval …``: the measuring commands, added to the ``toolgraph`` command.

The proxy's CLI does not import this package: it finds this module through the
``toolgraph.commands`` entry-point group (``pyproject.toml``), as it would any other
package's commands, so ``eval`` depends on ``proxy`` and never the other way round.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, TextIO

from eval import gate, plan_eval, retrieval

if TYPE_CHECKING:
    from proxy.config import Settings

COMMANDS: tuple[str, ...] = retrieval.COMMANDS


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``eval retrieval``, ``eval plan`` and ``eval gate``."""
    retrieval.add_commands(commands)
    plan_eval.add_command(commands)
    gate.add_command(commands)


def run_command(args: argparse.Namespace, settings: Settings, out: TextIO | None = None) -> int:
    if args.action == "plan":
        return plan_eval.run_command(args, settings, out)
    if args.action == "gate":
        return gate.run_command(args, settings, out)
    return retrieval.run_command(args, settings, out)
