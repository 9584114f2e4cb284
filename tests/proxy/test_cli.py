"""The ``toolgraph`` command finds other packages' commands without importing them."""

from __future__ import annotations

import subprocess
import sys

from proxy.cli import command_groups

NO_EVAL = (
    "import sys, proxy.cli\n"
    "sys.exit(any(name == 'eval' or name.startswith('eval.') for name in sys.modules))"
)


def test_importing_the_cli_imports_no_eval_module() -> None:
    assert subprocess.run([sys.executable, "-c", NO_EVAL], check=False).returncode == 0


def test_the_eval_commands_come_from_the_entry_point_group() -> None:
    assert any("eval" in group.COMMANDS for group in command_groups())
