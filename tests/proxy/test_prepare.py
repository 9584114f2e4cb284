"""``toolgraph prepare``: the embedding model's ONNX graphs made once, in one cache that
every data folder shares, so that a start on a new data folder exports nothing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from proxy.cli import main
from retriever.config import RetrieverConfig
from retriever.embedder import bundled_model_path
from retriever.onnx_encoder import onnx_file


def test_prepare_fills_the_shared_cache_and_no_data_folder(
    onnx_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # onnx_dir: the session's cache, TOOLGRAPH_RETRIEVER__ONNX_DIR (exported at session start)
    assert main(["prepare"]) == 0
    out = capsys.readouterr().out
    assert out.endswith(f": ready ({onnx_dir})\n")
    defaults = RetrieverConfig()
    for precision in ("fp32", defaults.onnx_query_precision):
        assert onnx_file(bundled_model_path(), "mean", precision, onnx_dir).is_file()
    data_dir = Path(os.environ["TOOLGRAPH_DATA_DIR"])
    assert not (data_dir / "onnx").exists()


def test_a_model_folder_that_is_not_there_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLGRAPH_RETRIEVER__MODEL_PATH", str(tmp_path / "nowhere"))
    assert main(["prepare"]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"toolgraph: no embedding model at {tmp_path / 'nowhere'}")
