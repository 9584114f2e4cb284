"""The evaluations' one data-folder setting: ``EVAL_DATA``, else ``shared/data`` beside the
repository."""

from __future__ import annotations

from pathlib import Path

import pytest

from eval import data_folder
from eval.data_folder import dataset

ROOT = Path(__file__).resolve().parents[2]


def test_eval_data_names_the_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("EVAL_DATA", str(tmp_path))
    assert dataset("train", "api_bank") == tmp_path / "train" / "api_bank"


def test_unset_or_blank_it_is_shared_data_beside_the_repository(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("EVAL_DATA", raising=False)
    assert data_folder.data_folder() == ROOT.parent / "shared" / "data"
    monkeypatch.setenv("EVAL_DATA", "  ")
    assert dataset("toolbench_stable") == ROOT.parent / "shared" / "data" / "toolbench_stable"


def test_no_eval_script_carries_its_own_shared_data_default() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in sorted((ROOT / "eval").rglob("*.py"))
        if "e2e" not in path.parts
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if not line.lstrip().startswith(("#", "python", "nice", "toolgraph"))
        and ('"../shared/data' in line or '"shared" / "data"' in line)
        and path.name != "data_folder.py"
    ]
    assert offenders == []
