"""``mcp_servers`` in the settings file: the one-line forms, and what is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from proxy.config import ConfigError, load_settings


def test_a_stdio_and_an_http_server_each_on_one_line(tmp_path: Path) -> None:
    settings = load_settings(
        _write(
            tmp_path,
            "mcp_servers:\n"
            "  - {name: files, command: [npx, server-filesystem, /tmp], env: {A: b}, cwd: /tmp}\n"
            "  - {name: remote, url: 'https://mcp.example.com/mcp', headers: {X-Key: 'env:MCP_KEY'}}\n",
        )
    )
    files, remote = settings.mcp_servers
    assert files.command == ["npx", "server-filesystem", "/tmp"]
    assert files.cwd == Path("/tmp")
    assert remote.url == "https://mcp.example.com/mcp"


def test_a_header_from_the_environment_is_a_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCP_KEY", "mcp-secret-0123456789")
    settings = load_settings(
        _write(
            tmp_path,
            "mcp_servers:\n"
            "  - {name: remote, url: 'https://mcp.example.com/mcp', headers: {X-Key: 'env:MCP_KEY'}}\n",
        )
    )
    assert settings.mcp_servers[0].header_values() == {"X-Key": "mcp-secret-0123456789"}
    assert "mcp-secret-0123456789" in settings.secrets()


@pytest.mark.parametrize(
    ("servers", "problem"),
    [
        ("[{name: both, command: [x], url: 'http://h/mcp'}]", "exactly one of command"),
        ("[{name: none}]", "exactly one of command"),
        ("[{name: a, command: [x]}, {name: a, command: [y]}]", "unique: a"),
        ("[{name: 'has space', command: [x]}]", "mcp_servers.0.name"),
        ("[{name: a, url: 'ftp://h'}]", "http:// or https://"),
    ],
)
def test_a_bad_server_is_refused_by_key(tmp_path: Path, servers: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        load_settings(_write(tmp_path, f"mcp_servers: {servers}\n"))


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "toolgraph.yaml"
    path.write_text(text)
    return path
