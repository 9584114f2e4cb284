"""From the model name a client sends to the upstream that answers it."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from proxy.config import ModelRouteSettings, PlannerProfile, Settings

# litellm providers that speak OpenAI's chat API at their base URL, so bytes can be
# relayed as they are instead of being parsed and rebuilt by litellm.
RELAY_PROVIDERS = frozenset({"openai", "hosted_vllm"})

OTHER = "other"


@dataclass(frozen=True, slots=True)
class Target:
    """Where one request goes: ``model`` is the name the upstream itself expects.

    ``label`` names it in metrics: the route's name, the configured ``upstream_model``,
    or ``other`` for a name only the client knows (a label per such name would let
    clients grow ``/metrics`` without bound).
    """

    model: str
    litellm_model: str
    base_url: str | None
    api_key: str | None
    via: Literal["relay", "litellm"]
    label: str = OTHER
    responses: Literal["auto", "native", "translate"] | None = None  # the route's own say
    planner: PlannerProfile | None = None  # the route's planner pipeline; unset, the global one


class ModelRouter:
    """The routing table, resolved once at start-up."""

    def __init__(self, settings: Settings) -> None:
        default_key = settings.upstream_api_key
        self._default_key = default_key.get_secret_value() if default_key else None
        self._default_base_url = settings.upstream_base_url
        self._routes = {route.name: _route_target(route) for route in settings.models}
        self._fallback = (
            _target(
                settings.upstream_model,
                "auto",
                settings.upstream_base_url,
                self._default_key,
                settings.upstream_model,
            )
            if settings.upstream_model
            else None
        )

    def names(self) -> list[str]:
        return list(self._routes)

    def has_litellm_routes(self) -> bool:
        return bool(self.litellm_labels())

    def litellm_labels(self) -> list[str]:
        """The routes (and the configured ``upstream_model``) that go through litellm."""
        targets = [*self._routes.values(), self._fallback]
        return [t.label for t in targets if t is not None and t.via == "litellm"]

    def default_upstream(self) -> Target:
        """The upstream of unrouted names, for what is no model's call (its model list)."""
        return self.resolve("", fallback=False)

    def resolve(self, model: str, fallback: bool = True) -> Target:
        """The route for ``model``; unnamed models go to the default upstream, as the
        configured ``upstream_model`` when there is one and ``fallback`` allows it."""
        target = self._routes.get(model) or (self._fallback if fallback else None)
        if target is not None:
            return target
        return Target(model, f"openai/{model}", self._default_base_url, self._default_key, "relay")


def _route_target(route: ModelRouteSettings) -> Target:
    target = _target(route.litellm_model, route.api, route.base_url, route.api_key(), route.name)
    return dataclasses.replace(target, responses=route.responses, planner=route.planner)


def _target(
    litellm_model: str,
    api: Literal["auto", "relay", "litellm"],
    base_url: str | None,
    api_key: str | None,
    label: str,
) -> Target:
    provider, _, name = litellm_model.partition("/")
    if not name:  # no provider prefix: an OpenAI-compatible model name
        provider, name, litellm_model = "openai", litellm_model, f"openai/{litellm_model}"
    relayable = provider in RELAY_PROVIDERS
    via: Literal["relay", "litellm"] = (
        "relay" if api == "relay" or (api == "auto" and relayable) else "litellm"
    )
    upstream_name = name if relayable else litellm_model
    return Target(upstream_name, litellm_model, base_url, api_key, via, label)
