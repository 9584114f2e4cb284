"""Loading the settings: the file, the environment and the overrides, checked together."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import (
    ValidationError,
)
from pydantic_settings import (
    SettingsError,
)

from proxy.config.base import (
    CONFIG_FILE_ENV,
    ENV_PREFIX,
    ConfigError,
    Section,
)
from proxy.config.settings import Settings, config_file_data


def load_settings(config_file: Path | str | None = None, **overrides: Any) -> Settings:
    """Load and validate the settings, or raise :class:`ConfigError` naming what is wrong."""
    path = config_file or os.environ.get(CONFIG_FILE_ENV)
    data = _read_config_file(Path(path)) if path else {}
    problems = _unknown_env_vars()
    token = config_file_data.set(data)
    try:
        settings = Settings(**{k: v for k, v in overrides.items() if v is not None})
    except ValidationError as exc:
        problems += [_describe(error) for error in exc.errors()]
        settings = None
    except SettingsError as exc:  # a TOOLGRAPH_ list or mapping whose value is not JSON
        field = re.search(r'field "([^"]+)"', str(exc))
        name = field.group(1) if field else "a setting"
        problems.append(f"{ENV_PREFIX}{name.upper()}: must be JSON for a list or mapping")
        settings = None
    finally:
        config_file_data.reset(token)
    if settings is not None:
        problems += _missing_route_keys(settings)
    if problems:
        origin = f" (config file {path})" if path else ""
        raise ConfigError(f"invalid settings{origin}: " + "; ".join(problems))
    assert settings is not None
    return settings


def _read_config_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None)
        detail = f" ({problem})" if problem else ""
        raise ConfigError(f"config file {path}{where}: not valid YAML{detail}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path}: the top level must be a mapping of settings")
    return data


def _unknown_env_vars() -> list[str]:
    known = {ENV_PREFIX + name.upper() for name in Settings.model_fields}
    known.add(CONFIG_FILE_ENV)
    nested = {
        name: field.annotation
        for name, field in Settings.model_fields.items()
        if isinstance(field.annotation, type) and issubclass(field.annotation, Section)
    }
    for section, model in nested.items():
        known |= {f"{ENV_PREFIX}{section.upper()}__{sub.upper()}" for sub in model.model_fields}
    return [
        f"{name}: unknown setting"
        for name in sorted(os.environ)
        if name.upper().startswith(ENV_PREFIX) and name.upper() not in known
    ]


def _missing_route_keys(settings: Settings) -> list[str]:
    return [
        f"models.{i}.api_key_env: environment variable {route.api_key_env} is not set"
        for i, route in enumerate(settings.models)
        if route.api_key_env and route.api_key_env not in os.environ
    ]


def _describe(error: Any) -> str:
    key = ".".join(str(part) for part in error["loc"]) or "settings"
    if error["type"] == "extra_forbidden":
        return f"{key}: unknown setting"
    env = ENV_PREFIX + "__".join(str(p).upper() for p in error["loc"] if not isinstance(p, int))
    hint = (
        f" (or {env})" if error["loc"] and not any(isinstance(p, int) for p in error["loc"]) else ""
    )
    value = error.get("input")
    shown = f", got {value!r}" if isinstance(value, str | int | float) and "key" not in key else ""
    return f"{key}{hint}: {error['msg']}{shown}"
