"""The model list on the wire: ``GET /v1/models`` and ``GET /v1/models/{id}``."""

from __future__ import annotations

from pydantic import Field, ValidationError

from proxy import json_codec
from proxy.errors import UpstreamError
from proxy.protocol.base import WireReply


class Model(WireReply):
    id: str = Field(min_length=1)
    object: str = "model"
    created: int = 0
    owned_by: str = "toolgraph"


class ModelList(WireReply):
    object: str = "list"
    data: list[Model]


def parse_model_list(content: bytes) -> ModelList:
    """An upstream's answer to ``GET /models``, or :class:`UpstreamError` when it is not one."""
    try:
        return ModelList.model_validate(json_codec.loads(content))
    except (json_codec.DecodeError, ValidationError):
        raise UpstreamError(
            "the upstream's model list is not in OpenAI's shape", code="upstream_bad_models"
        ) from None
