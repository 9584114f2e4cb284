"""Wire models of the tool registry API."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, JsonValue, model_validator

from graph_store.models import Tool


class RegisterTools(BaseModel):
    """Tools to add: OpenAI function specs, one OpenAPI 3 document, or the URL of one
    (fetched under the tools' egress policy): exactly one of the three.

    ``test_arguments`` maps a tool's name to the arguments of its dry-run call.
    """

    model_config = ConfigDict(extra="forbid")

    openai: list[dict[str, JsonValue]] | None = None
    openapi: dict[str, JsonValue] | None = None
    openapi_url: str | None = None
    category: str | None = None
    test_arguments: dict[str, dict[str, JsonValue]] = {}

    @model_validator(mode="after")
    def _one_source(self) -> RegisterTools:
        given = [self.openai, self.openapi, self.openapi_url]
        if sum(source is not None for source in given) != 1:
            raise ValueError(
                "send exactly one of 'openai' (function specs), 'openapi' (a document) "
                "or 'openapi_url'"
            )
        return self


def tool_summary(tool: Tool) -> dict[str, Any]:
    """A tool as the registry lists it: everything but its provenance file path."""
    record = tool.model_dump(mode="json", exclude={"provenance"})
    record["object"] = "tool"
    record["format"] = tool.provenance.format
    return record
