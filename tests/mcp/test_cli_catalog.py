"""``toolgraph catalog``, ``index`` and ``search`` with ``--config``: the catalog the proxy
would serve with those settings, a database pack's and a published MCP server's tools
included, and one line on stderr for a server that does not start."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from proxy.cli import main
from proxy.config import load_settings
from proxy.tools.packs.database.catalog import database_tools
from tests.mcp.test_published import time_server

SHOP = Path(__file__).resolve().parents[2] / "proxy/tools/packs/database/demo/shop.sqlite"


def write_config(tmp_path: Path, servers: list[dict[str, Any]]) -> Path:
    database = tmp_path / "shop.sqlite"
    shutil.copyfile(SHOP, database)
    settings = {
        "orchestrate": {"builtin_tools": False},
        "packs": {"database": [{"name": "shop", "url": f"sqlite:///{database}"}]},
        "mcp_servers": servers,
    }
    path = tmp_path / "toolgraph.yaml"
    path.write_text(yaml.safe_dump(settings))
    return path


def time_setting() -> dict[str, Any]:
    return time_server().model_dump(mode="json", exclude_defaults=True)


def broken_setting(name: str) -> dict[str, Any]:
    """A stdio server whose process exits at once."""
    return {"name": name, "command": [sys.executable, "-c", "raise SystemExit(3)"]}


def listed(capfd: pytest.CaptureFixture[str], *args: str) -> tuple[list[str], list[str]]:
    assert main(["catalog", "list", "--limit", "500", *args]) == 0
    captured = capfd.readouterr()
    return [line.split("\t")[0] for line in captured.out.splitlines()], captured.err.splitlines()


def test_catalog_list_shows_the_database_pack_and_the_mcp_servers_tools(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path, [time_setting()])
    names, err = listed(capfd, "--config", str(config))
    assert err == []
    pack = [tool.name for tool in database_tools(load_settings(config).packs.database)]
    assert "shop_run_select" in pack
    assert set(pack) <= set(names)
    assert {"time_get_current_time", "time_convert_time"} <= set(names)
    assert len(names) == len(pack) + 2  # nothing else: the built-in pack is off here
    assert main(["catalog", "show", "shop_run_select", "--config", str(config)]) == 0
    shown = json.loads(capfd.readouterr().out)
    assert (shown["name"], shown["category"]) == ("shop_run_select", "database")


def test_a_server_that_does_not_start_is_one_line_and_its_tools_are_left_out(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    names, _ = listed(capfd, "--config", str(write_config(tmp_path, [time_setting()])))
    assert "time_get_current_time" in names
    # The same server name, now with a command that exits: its tools stay in the store
    # (a server that is down keeps them) but the proxy would not serve them, nor list them.
    config = write_config(tmp_path, [broken_setting("time")])
    names, err = listed(capfd, "--config", str(config))
    assert "shop_run_select" in names
    assert not [name for name in names if name.startswith("time_")]
    [line] = err
    assert line.startswith("toolgraph: MCP server time is left out: ")
    assert "ExceptionGroup" not in line  # the cause, not the SDK's task-group wrapper
    assert main(["catalog", "show", "time_get_current_time", "--config", str(config)]) == 0


def test_index_build_and_search_see_the_packs_and_servers(
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    query_precision: str,
) -> None:
    monkeypatch.setenv("TOOLGRAPH_RETRIEVER__ONNX_QUERY_PRECISION", query_precision)
    config = write_config(tmp_path, [time_setting(), broken_setting("down")])
    assert main(["index", "build", "--quiet", "--config", str(config)]) == 0
    captured = capfd.readouterr()
    assert captured.err.splitlines()[0].startswith("toolgraph: MCP server down is left out")
    pack = database_tools(load_settings(config).packs.database)
    assert f"{len(pack) + 2} added" in captured.out
    query = "what time is it now in Tokyo"
    assert main(["search", query, "-k", "3", "--config", str(config)]) == 0
    hits = [line.split()[2] for line in capfd.readouterr().out.splitlines()]
    assert "time_get_current_time" in hits
