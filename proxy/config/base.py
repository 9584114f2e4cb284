"""What every settings section shares: its base class, the error, the checks."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
)

ENV_PREFIX = "TOOLGRAPH_"
CONFIG_FILE_ENV = "TOOLGRAPH_CONFIG"

#: The planner pipelines a route chooses between (``PlannerSettings.profile``,
#: ``ModelRouteSettings.planner``): the settings each gives where the configuration does not
#: set them itself (the table and figures are in docs/orchestrate.md).
PlannerProfile = Literal["small", "full"]
PROFILES: dict[PlannerProfile, dict[str, Any]] = {
    "small": {"triage": True, "pick": "confident", "reflection_rounds": 0},
    "full": {"triage": False, "pick": "llm", "reflection_rounds": 2},
}


class ConfigError(Exception):
    """Settings that cannot be used; the message names every offending key."""


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def check_http_url(value: str | None) -> str | None:
    """``value`` as an http(s) URL that parses and names a host (``http://[::1`` and
    ``http:///x`` once got as far as a connection: a 500, or a request to nowhere)."""
    if value is None:
        return None
    if not value.startswith(("http://", "https://")) or len(value) < len("http://x"):
        raise ValueError("must be an http:// or https:// URL")
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 (read for its check: a port past 65535 raises)
    except ValueError as exc:
        raise ValueError(f"not a URL ({exc})") from None
    if not parts.hostname:
        raise ValueError("must name a host (http://HOST/…)")
    return value.rstrip("/")


def used_twice(names: Iterable[str]) -> list[str]:
    """The names that occur more than once, sorted."""
    counts = Counter(names)
    return sorted(name for name, count in counts.items() if count > 1)
