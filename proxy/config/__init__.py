"""toolgraph's settings: one typed object, loaded once at start-up and passed down.

Sources, strongest first: keyword overrides (the CLI's ``--host``/``--port``),
``TOOLGRAPH_*`` environment variables (nested keys with ``__``, e.g.
``TOOLGRAPH_LIMITS__MAX_BODY_BYTES``), the YAML file named by ``--config`` or
``TOOLGRAPH_CONFIG``, then the defaults. Anything invalid, including an
unknown key in the file or an unknown ``TOOLGRAPH_`` variable, stops start-up with
a :class:`ConfigError` that names the key.

:mod:`.settings` holds the object, :mod:`.serving`, :mod:`.engine` and :mod:`.sources`
its sections (each a ``*Settings`` class), :mod:`.loader` the loading; :mod:`.base`
what they share. Everything is importable from here.
"""

from __future__ import annotations

from proxy.config.base import CONFIG_FILE_ENV, ENV_PREFIX, PROFILES, ConfigError, PlannerProfile
from proxy.config.engine import (
    ExecutorSettings,
    LearningSettings,
    OrchestrateSettings,
    PlannerSettings,
    ToolCredentialSettings,
)
from proxy.config.loader import load_settings
from proxy.config.serving import (
    LimitsSettings,
    ModelRouteSettings,
    ResponsesSettings,
    RetrieverSettings,
    TimeoutsSettings,
)
from proxy.config.settings import Settings
from proxy.config.sources import (
    DatabasePackSettings,
    KnowledgeGraphPackSettings,
    McpServerSettings,
    PacksSettings,
)

__all__ = [
    "CONFIG_FILE_ENV",
    "ENV_PREFIX",
    "PROFILES",
    "ConfigError",
    "DatabasePackSettings",
    "ExecutorSettings",
    "KnowledgeGraphPackSettings",
    "LearningSettings",
    "LimitsSettings",
    "McpServerSettings",
    "ModelRouteSettings",
    "OrchestrateSettings",
    "PacksSettings",
    "PlannerProfile",
    "PlannerSettings",
    "ResponsesSettings",
    "RetrieverSettings",
    "Settings",
    "TimeoutsSettings",
    "ToolCredentialSettings",
    "load_settings",
]
