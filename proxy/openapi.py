"""The OpenAPI description of toolgraph's own routes, served at ``/openapi.json`` (and
read by Swagger UI at ``/docs``).

The OpenAI-compatible routes (chat completions, responses, embeddings, …) are not in it:
they are plain Starlette routes whose shape is OpenAI's own specification. What is in it:
the tool registry, the MCP-server registry, traces, the catalog views, models, and the
probes. FastAPI's generated schema is adjusted in three ways, so that it says what the
server does: each operation names the key it needs (read from the route's auth
dependency, so the schema cannot drift from the rules), errors have OpenAI's error
shape with the statuses toolgraph sends (400, not FastAPI's 422), and the two routes
that read their body themselves name the body's model.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from fastapi import FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute, iter_route_contexts
from pydantic import BaseModel

from proxy.auth import authenticate
from proxy.config import McpServerSettings
from proxy.registry.protocol import RegisterTools
from proxy.registry.router import require_admin

_DESCRIPTION = (
    "toolgraph's own API: the tool and MCP-server registries (admin key), traces and "
    "catalog views (master key, when one is set), models and the probes. The "
    "OpenAI-compatible routes follow OpenAI's API reference and are not listed here."
)
#: The routes that read their JSON body themselves (size limits first), by path and method.
_BODIES: dict[tuple[str, str], type[BaseModel]] = {
    ("/v1/toolgraph/tools", "post"): RegisterTools,
    ("/v1/toolgraph/mcp/servers", "post"): McpServerSettings,
}
_SCHEMES = {
    "master_key": {
        "type": "http",
        "scheme": "bearer",
        "description": "TOOLGRAPH_MASTER_KEY; without a master key these routes are open.",
    },
    "admin_key": {
        "type": "http",
        "scheme": "bearer",
        "description": "TOOLGRAPH_ADMIN_KEY; without an admin key these routes answer 403.",
    },
}
_ERROR = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["message", "type"],
            "properties": {
                "message": {"type": "string"},
                "type": {"type": "string"},
                "param": {"type": ["string", "null"]},
                "code": {"type": ["string", "null"]},
            },
        }
    },
}
_ERROR_STATUSES = {
    "400": "The request is not valid (a parameter or the body).",
    "401": "The key is missing or wrong.",
    "403": "The route is closed (no admin key is configured).",
}


def install(app: FastAPI) -> None:
    """Serve the adjusted schema as ``app``'s (built once, on first request)."""

    def schema() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = describe(app)
        return app.openapi_schema

    app.openapi = schema  # type: ignore[method-assign]


def describe(app: FastAPI) -> dict[str, Any]:
    """The OpenAPI document of ``app``'s FastAPI routes, adjusted as the module says."""
    schema = get_openapi(
        title=app.title, version=_version(), description=_DESCRIPTION, routes=app.routes
    )
    components = schema.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    schemas["Error"] = _ERROR
    components["securitySchemes"] = _SCHEMES
    keys = {
        context.path_format: _key_of(context.dependant)
        for context in iter_route_contexts(app.routes)
        if isinstance(context.original_route, APIRoute)
    }
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            _adjust(operation, keys.get(path), _BODIES.get((path, method)), schemas)
    return schema


def _adjust(
    operation: dict[str, Any],
    key: str | None,
    body: type[BaseModel] | None,
    schemas: dict[str, Any],
) -> None:
    responses = operation.setdefault("responses", {})
    responses.pop("422", None)
    statuses = ["400"] if operation.get("parameters") or body is not None else []
    if key is not None:
        operation["security"] = [{key: []}]
        statuses += ["401", "403"] if key == "admin_key" else ["401"]
    for status in statuses:
        responses[status] = {
            "description": _ERROR_STATUSES[status],
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
        }
    if body is not None:
        model = body.model_json_schema(ref_template="#/components/schemas/{model}")
        schemas.update(model.pop("$defs", {}))
        schemas[body.__name__] = model
        operation["requestBody"] = {
            "required": True,
            "content": {
                "application/json": {"schema": {"$ref": f"#/components/schemas/{body.__name__}"}}
            },
        }


def _key_of(dependant: Dependant) -> str | None:
    """The key a route asks for, from the auth dependency it runs (none: it is open)."""
    calls: set[Callable[..., Any] | None] = {d.call for d in dependant.dependencies}
    if require_admin in calls:
        return "admin_key"
    if authenticate in calls:
        return "master_key"
    return None


def _version() -> str:
    try:
        return version("toolgraph")
    except PackageNotFoundError:  # a checkout that was never installed
        return "0"
