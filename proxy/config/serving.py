"""The sections of serving a request: the routing table, limits, timeouts, the Responses
API's store, the retriever."""

from __future__ import annotations

import os
from typing import Literal

from pydantic import (
    Field,
    field_validator,
)

from proxy.config.base import (
    PlannerProfile,
    Section,
    check_http_url,
)
from retriever.config import RetrieverConfig


class ModelRouteSettings(Section):
    """One entry of the routing table: a model name clients send, and where it goes."""

    name: str = Field(min_length=1, description="The model name clients send.")
    litellm_model: str = Field(
        min_length=1,
        description="litellm's `provider/model`, e.g. `openai/gpt-4o`.",
    )
    base_url: str | None = Field(
        default=None, description="The provider's API base URL; the provider's default when unset."
    )
    api_key_env: str | None = Field(
        default=None,
        description="Name of the environment variable that holds this upstream's key.",
    )
    api: Literal["auto", "relay", "litellm"] = Field(
        default="auto",
        description="`relay` streams bytes to an OpenAI-compatible API, `litellm` translates; "
        "`auto` relays for the `openai` and `hosted_vllm` providers.",
    )
    responses: Literal["auto", "native", "translate"] | None = Field(
        default=None,
        description="`upstream_responses` for this route alone; unset, the global one.",
    )
    planner: PlannerProfile | None = Field(
        default=None,
        description="The planner pipeline orchestrate mode runs for this model (`small` or "
        "`full`, see `planner.profile`); unset, `planner.profile`.",
    )

    @field_validator("base_url")
    @classmethod
    def _check_url(cls, value: str | None) -> str | None:
        return check_http_url(value)

    def api_key(self) -> str | None:
        if self.api_key_env is None:
            return None
        return os.environ.get(self.api_key_env)


class LimitsSettings(Section):
    max_body_bytes: int = Field(default=16 * 1024 * 1024, gt=0, description="Largest request body.")
    max_messages: int = Field(default=4096, gt=0, description="Most messages in one request.")
    max_tools: int = Field(default=8192, gt=0, description="Most tools in one request.")
    max_content_parts: int = Field(
        default=4096,
        gt=0,
        description="Most content parts (text, images…) in one request, all messages together.",
    )
    max_json_depth: int = Field(
        default=128,
        gt=0,
        le=250,
        description="Deepest nesting of a request body (orjson encodes at most 255 levels).",
    )


class TimeoutsSettings(Section):
    upstream_connect: float = Field(default=10.0, gt=0, description="Seconds to connect upstream.")
    upstream_read: float = Field(
        default=300.0, gt=0, description="Seconds the upstream may stay silent mid-answer."
    )
    request: float = Field(default=900.0, gt=0, description="Seconds one request may take.")


class ResponsesSettings(Section):
    """`/v1/responses`: the responses kept for `previous_response_id` and `GET`."""

    store_ttl: int = Field(
        default=24 * 3600,
        gt=0,
        description="Seconds a stored response (and the conversation up to it) is kept.",
    )
    max_stored: int = Field(
        default=2000,
        gt=0,
        description="Responses kept, in process or in Redis (there for all replicas together); "
        "the oldest goes first.",
    )
    max_stored_bytes: int = Field(
        default=1024 * 1024,
        gt=0,
        description="Largest stored response with its conversation (each keeps the whole "
        "conversation up to it, once); a larger one is answered, logged and not stored.",
    )
    max_total_bytes: int = Field(
        default=512 * 1024 * 1024,
        gt=0,
        description="Bytes all stored responses hold together, every tenant's (the oldest goes "
        "first): the most they take of the proxy's memory, or of Redis'.",
    )
    tenant_bytes: int = Field(
        default=64 * 1024 * 1024,
        gt=0,
        description="Bytes one tenant's (one key's) stored responses hold together: past it "
        "that tenant's oldest response goes, never another tenant's.",
    )


class RetrieverSettings(RetrieverConfig, Section):
    """Embeddings, the catalog index and select mode (see retriever/README.md)."""
