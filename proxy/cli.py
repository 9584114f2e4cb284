"""The ``toolgraph`` command."""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import tempfile
from importlib.metadata import entry_points
from pathlib import Path
from typing import Protocol, TextIO

from graph_store.cli import COMMANDS as GRAPH_COMMANDS
from graph_store.cli import StoreCommandSettings
from graph_store.cli import add_commands as add_graph_commands
from graph_store.cli import run_command as run_graph_command
from graph_store.errors import GraphStoreError
from proxy.catalog.command import served_catalog
from proxy.config import CONFIG_FILE_ENV, ConfigError, Settings, load_settings
from proxy.errors import StoreUnavailable
from proxy.extras import check_extras
from proxy.learning import command as learning_command
from proxy.logs import configure_logging, supervisor_log_config
from proxy.mcp import command as mcp_command
from proxy.tenancy import command as keys_command
from proxy.tools_command import COMMANDS as TOOL_COMMANDS
from proxy.tools_command import add_commands as add_tool_commands
from proxy.tools_command import run_command as run_tool_command
from retriever.cli import COMMANDS as RETRIEVER_COMMANDS
from retriever.cli import IndexCommandSettings
from retriever.cli import add_commands as add_retriever_commands
from retriever.cli import run_command as run_retriever_command

#: The entry-point group of other packages' commands (``eval`` adds its own there).
COMMAND_GROUP = "toolgraph.commands"


class CommandGroup(Protocol):
    """A module that adds commands to ``toolgraph``, found through :data:`COMMAND_GROUP`."""

    COMMANDS: tuple[str, ...]

    def add_commands(self, commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
        """Add the group's subcommands to the ``toolgraph`` parser."""

    def run_command(
        self, args: argparse.Namespace, settings: Settings, out: TextIO | None = None
    ) -> int:
        """Run one of them with the loaded settings; the process's exit status."""


def command_groups() -> list[CommandGroup]:
    """The installed command groups, by entry-point name; loaded when the CLI runs."""
    found = sorted(entry_points(group=COMMAND_GROUP), key=lambda point: point.name)
    return [point.load() for point in found]


def main(argv: list[str] | None = None) -> int:
    groups = command_groups()
    parser = _parser(groups)
    args = parser.parse_args(argv)
    try:
        settings = load_settings(args.config, host=args.host, port=args.port, workers=args.workers)
        check_extras(settings)
    except ConfigError as exc:
        print(f"toolgraph: {exc}", file=sys.stderr)
        return 2
    if args.command == "serve":
        return serve(settings, args.config)
    if args.command == "prepare":
        return prepare(settings)
    if args.command in GRAPH_COMMANDS:
        return _run_graph_command(args, settings)
    if args.command in RETRIEVER_COMMANDS:
        left_out = _served_catalog(settings)
        if left_out is None:
            return 2
        return run_retriever_command(args, _index_command_settings(settings, left_out))
    if args.command in TOOL_COMMANDS:
        return run_tool_command(args, settings)
    if args.command in mcp_command.COMMANDS:
        return mcp_command.run_command(args, settings)
    if args.command in keys_command.COMMANDS:
        return keys_command.run_command(args, settings)
    if args.command in learning_command.COMMANDS:
        return learning_command.run_command(args, settings)
    for group in groups:
        if args.command in group.COMMANDS:
            return group.run_command(args, settings)
    parser.print_help()
    return 2


def _run_graph_command(args: argparse.Namespace, settings: Settings) -> int:
    """graph_store's commands; ``catalog import``'s MCP server specs first (they need
    the MCP SDK, which graph_store does not use: proxy/mcp/imported.py)."""
    status = 0
    if (args.command, args.action) == ("catalog", "import"):
        from proxy.mcp.imported import import_command  # the MCP SDK: only when importing

        status = import_command(args, settings, sys.stdout)
        if not args.paths:
            return status
    left_out = frozenset() if args.action in _STORE_AS_IT_IS else _served_catalog(settings)
    if left_out is None:
        return 2
    return max(status, run_graph_command(args, _store_command_settings(settings, left_out)))


#: The commands that read or write the store as it is, not the catalog the proxy serves.
_STORE_AS_IT_IS = ("import", "push", "pull")


def _served_catalog(settings: Settings) -> frozenset[str] | None:
    """The store made the catalog the proxy would serve (packs, MCP servers); the tools
    it would leave out, or None (said on stderr) when the store cannot be read."""
    try:
        return served_catalog(settings, sys.stderr)
    except (GraphStoreError, StoreUnavailable) as exc:
        print(f"toolgraph: {exc}", file=sys.stderr)
        return None


def _store_command_settings(settings: Settings, left_out: frozenset[str]) -> StoreCommandSettings:
    key = settings.upstream_api_key
    return StoreCommandSettings(
        data_dir=settings.data_dir,
        neo4j_uri=settings.neo4j_uri,
        upstream_base_url=settings.upstream_base_url,
        upstream_api_key=key.get_secret_value() if key else None,
        upstream_model=settings.upstream_model,
        upstream_read_timeout=settings.timeouts.upstream_read,
        left_out=left_out,
    )


def _index_command_settings(settings: Settings, left_out: frozenset[str]) -> IndexCommandSettings:
    return IndexCommandSettings(
        settings.retriever, settings.data_dir, settings.qdrant_url, settings.neo4j_uri, left_out
    )


def prepare(settings: Settings, out: TextIO | None = None) -> int:
    """Load the embedding model once: its ONNX graphs (fp32 for documents, the query
    precision's for questions) are exported and quantized into ``retriever.onnx_dir``
    when missing, so that no start pays for them."""
    from retriever.embedder import load_encoder
    from retriever.errors import RetrieverError

    try:
        encoder = load_encoder(settings.retriever)
    except RetrieverError as exc:
        print(f"toolgraph: {exc}", file=sys.stderr)
        return 2
    folder = settings.retriever.onnx_folder()
    print(f"{encoder.name}: ready ({folder})", file=out or sys.stdout)
    return 0


def serve(settings: Settings, config_file: Path | None) -> int:
    import uvicorn

    configure_logging(settings.log_level)
    options = uvicorn_options(settings)
    if settings.workers == 1:
        from proxy.app import create_app

        uvicorn.run(create_app(settings), **options)  # type: ignore[arg-type]
        return 0
    # Workers are new processes that load the settings again; they must find the
    # same file, and the same overrides the command line gave.
    if config_file is not None:
        os.environ[CONFIG_FILE_ENV] = str(Path(config_file).resolve())
    os.environ["TOOLGRAPH_HOST"], os.environ["TOOLGRAPH_PORT"] = settings.host, str(settings.port)
    multiproc_dir = tempfile.mkdtemp(prefix="toolgraph-metrics-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = multiproc_dir
    try:
        app = "proxy.app:create_app_from_environment"
        uvicorn.run(app, factory=True, **options)  # type: ignore[arg-type]
    finally:
        shutil.rmtree(multiproc_dir, ignore_errors=True)
    return 0


def uvicorn_options(settings: Settings) -> dict[str, object]:
    """What ``uvicorn.run`` is given. With several workers, the supervisor's health check
    waits ``worker_start_timeout`` (its 5 s default killed workers still loading on a
    host at load 8, in a loop, so the proxy never became ready) and says what it does to
    workers in the log (:class:`~proxy.logs.SupervisorLines`)."""
    options: dict[str, object] = {
        "host": settings.host,
        "port": settings.port,
        "loop": "uvloop",
        "http": "httptools",
        "access_log": False,  # toolgraph logs one line per request itself
        "ws": "none",
        "log_level": "warning",
        "timeout_graceful_shutdown": 30,
    }
    if settings.workers > 1:
        options["workers"] = settings.workers
        options["timeout_worker_healthcheck"] = math.ceil(settings.worker_start_timeout)
        options["log_level"] = "info"  # the filter lets only the workers' lines through
        options["log_config"] = supervisor_log_config()
    return options


def _parser(groups: list[CommandGroup]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="toolgraph", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    serve_cmd = commands.add_parser("serve", help="run the OpenAI-compatible proxy")
    serve_cmd.add_argument("--config", type=Path, help="YAML settings file")
    serve_cmd.add_argument("--host", help="address to listen on (TOOLGRAPH_HOST)")
    serve_cmd.add_argument("--port", type=int, help="port to listen on (TOOLGRAPH_PORT)")
    serve_cmd.add_argument("--workers", type=int, help="worker processes (TOOLGRAPH_WORKERS)")
    prepared = commands.add_parser(
        "prepare", help="export the embedding model's ONNX graphs once (make run does)"
    )
    prepared.add_argument("--config", type=Path, help="YAML settings file")
    prepared.set_defaults(host=None, port=None, workers=None)
    add_graph_commands(commands)
    add_retriever_commands(commands)
    add_tool_commands(commands)
    mcp_command.add_commands(commands)
    keys_command.add_commands(commands)
    learning_command.add_commands(commands)
    for group in groups:
        group.add_commands(commands)
    return parser


if __name__ == "__main__":
    sys.exit(main())
