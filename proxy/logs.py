"""The process's log: one handler and format, other libraries' chatter kept out, and the
line each process writes when it starts.

:func:`configure_logging` runs once per process (``toolgraph serve``, and each worker
uvicorn spawns). toolgraph's own loggers log at ``log_level``; every other library's
records reach the log from WARNING up only, whatever level the library set on its own
logger (bm25s sets DEBUG on import, after any level set here), so the filter sits on
the handler rather than on their loggers. Progress bars are not logging: the places
that call a library that draws one turn it off there (``show_progress=False``,
``progress=False``, ``HF_HUB_DISABLE_PROGRESS_BARS`` where the embedding model loads).

:func:`startup_line` says where the process listens and what it uses, with no secret
in it: URLs lose their user info and query, keys are named, never shown.
"""

from __future__ import annotations

import copy
import logging
import os
import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from proxy.config import Settings
from proxy.context import current_request_id

#: The packages whose loggers follow ``log_level``; all others log from WARNING up.
OWN_LOGGERS = ("proxy", "graph_store", "retriever")

_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"


def configure_logging(level: str) -> None:
    """One stderr handler on the root logger, toolgraph's loggers at ``level``."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter(_FORMAT))
    handler.addFilter(_add_request_id)
    handler.addFilter(_own_or_warning)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
    for name in OWN_LOGGERS:
        logging.getLogger(name).setLevel(level.upper())


def _add_request_id(record: logging.LogRecord) -> bool:
    record.request_id = current_request_id.get()
    return True


def _own_or_warning(record: logging.LogRecord) -> bool:
    return record.levelno >= logging.WARNING or record.name.split(".")[0] in OWN_LOGGERS


def startup_line(settings: Settings, catalog: str) -> str:
    """What this process serves and uses; ``catalog``: the catalog's state in words."""
    routes = len(settings.models)
    routed = f", {routes} routed model{'s' * (routes != 1)}" if routes else ""
    return (
        f"toolgraph serving on http://{settings.host}:{settings.port} (pid {os.getpid()}): "
        f"upstream {public_url(settings.upstream_base_url)} ({_upstream_key(settings)}){routed}; "
        f"default mode {settings.default_mode}; catalog {catalog}; stores: {_stores(settings)}"
    )


def public_url(url: str) -> str:
    """``url`` without its user info (a password) and query (a key, for some providers)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:  # IPv6
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port is not None else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _upstream_key(settings: Settings) -> str:
    if settings.upstream_api_key is not None:
        return "key set"
    if settings.master_key is not None:
        return "no key"
    return "each client's own key"


def _stores(settings: Settings) -> str:
    redis = f"Redis {public_url(settings.redis_url)}" if settings.redis_url else "in-process"
    qdrant = (
        f"Qdrant {public_url(settings.qdrant_url)}"
        if settings.qdrant_url
        else f"Qdrant local under {settings.data_dir}"
    )
    graph = (
        f"Neo4j {public_url(settings.neo4j_uri)}"
        if settings.neo4j_uri
        else f"embedded under {settings.data_dir}"
    )
    return f"caches and traces {redis}, vectors {qdrant}, graph {graph}"


#: uvicorn's info lines that tell of workers starting, dying and being replaced.
_SUPERVISOR_LINES = re.compile(
    r"^(Child process \[|New child process \[|Started server process \[|Started parent process|"
    r"Stopping parent process)"
)


class SupervisorLines(logging.Filter):
    """uvicorn's warnings and errors, and of its info lines only those about worker
    processes: under ``--workers`` the supervisor replaced a worker that did not answer
    its health check (one still loading on a busy host) at info level, which the
    warning level toolgraph gives uvicorn hid, so a proxy that never became ready said
    nothing of why."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.WARNING:
            return True
        return bool(_SUPERVISOR_LINES.match(record.getMessage()))


def supervisor_log_config() -> dict[str, object]:
    """uvicorn's logging configuration with :class:`SupervisorLines` on its handler."""
    from uvicorn.config import LOGGING_CONFIG

    config: dict[str, Any] = copy.deepcopy(LOGGING_CONFIG)
    config["filters"] = {"supervisor": {"()": SupervisorLines}}
    config["handlers"]["default"]["filters"] = ["supervisor"]
    return config
