"""Wire models of the tool registry API."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, JsonValue, model_validator

from graph_store.models import Tool


class RegisterTools(BaseModel):
    """Tools to add: OpenAI function specs or one OpenAPI 3 document, not both.

    ``test_arguments`` maps a tool's name to the arguments of its dry-run call.
    """

    model_config = ConfigDict(extra="forbid")

    openai: list[dict[str, JsonValue]] | None = None
    openapi: dict[str, JsonValue] | None = None
    category: str | None = None
    test_arguments: dict[str, dict[str, JsonValue]] = {}

    @model_validator(mode="after")
    def _one_source(self) -> RegisterTools:
        if (self.openai is None) == (self.openapi is None):
            raise ValueError("send exactly one of 'openai' (function specs) or 'openapi'")
        return self


def tool_summary(tool: Tool) -> dict[str, Any]:
    """A tool as the registry lists it: everything but its provenance file path."""
    record = tool.model_dump(mode="json", exclude={"provenance"})
    record["object"] = "tool"
    record["format"] = tool.provenance.format
    return record
