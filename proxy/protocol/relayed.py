"""The routes toolgraph passes to the upstream as they came: embeddings, completions
(the text API before chat) and moderations.

Each request is checked only as far as toolgraph reads it (``model``, to route it;
``stream``, to answer with events) and as OpenAI requires it (the input is there), so a
bad one is a 400 in OpenAI's shape before anything goes upstream; the upstream gets the
client's bytes, and the client the upstream's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import Field, ValidationError

from proxy.errors import InvalidRequest
from proxy.protocol.base import WireRequest, invalid_request


class RelayedRequest(WireRequest):
    """What every relayed request has; ``model`` is optional only for moderations."""

    model: str | None = Field(default=None, min_length=1)

    @property
    def streams(self) -> bool:
        return False


class EmbeddingRequest(RelayedRequest):
    model: str = Field(min_length=1)
    input: str | list[Any]  # strings, token ids, or lists of token ids


class CompletionRequest(RelayedRequest):
    model: str = Field(min_length=1)
    prompt: str | list[Any]
    stream: bool | None = None

    @property
    def streams(self) -> bool:
        return bool(self.stream)


class ModerationRequest(RelayedRequest):
    input: str | list[Any]  # strings, or text and image parts


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One relayed route: its path under ``/v1`` (and under the upstream's base URL)."""

    path: str
    request: type[RelayedRequest]
    #: Whether the configured ``upstream_model`` answers a name the routing table lacks,
    #: as it does for chat; an embedding or moderation model is never the chat model.
    chat_model: bool

    def parse(self, body: object) -> RelayedRequest:
        """The checked request, or :class:`InvalidRequest` naming the first bad field."""
        if not isinstance(body, dict):
            raise InvalidRequest("the request body must be a JSON object", code="invalid_type")
        try:
            return self.request.model_validate(body)
        except ValidationError as exc:
            raise invalid_request(exc.errors()[0]) from None


EMBEDDINGS = Endpoint("/embeddings", EmbeddingRequest, chat_model=False)
COMPLETIONS = Endpoint("/completions", CompletionRequest, chat_model=True)
MODERATIONS = Endpoint("/moderations", ModerationRequest, chat_model=False)
ENDPOINTS = (EMBEDDINGS, COMPLETIONS, MODERATIONS)
