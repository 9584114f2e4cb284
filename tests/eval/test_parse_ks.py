"""``--k`` of ``toolgraph eval retrieval`` and ``toolgraph eval plan``."""

from __future__ import annotations

import pytest

from eval.retrieval import parse_ks


def test_list_sizes_are_sorted_and_unique() -> None:
    assert parse_ks("10,1, 5,5") == [1, 5, 10]


@pytest.mark.parametrize("text", ["", "0,5", "1,x", "-3"])
def test_bad_sizes_are_named_on_stderr(text: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert parse_ks(text) is None
    assert f"--k must be positive integers, got {text!r}" in capsys.readouterr().err
