"""``/openapi.json`` and ``/docs``: toolgraph's own routes, described as they behave."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from tests.conftest import ServerThread

MASTER = "tg-master-key-0123456789"
ADMIN = "tg-admin-key-0123456789"


@pytest.fixture
def guarded(start_proxy: Any) -> ServerThread:
    server: ServerThread = start_proxy(master_key=MASTER, admin_key=ADMIN)
    return server


def schema_of(server: ServerThread) -> dict[str, Any]:
    response = httpx.get(f"{server.url}/openapi.json", timeout=30)
    assert response.status_code == 200
    document: dict[str, Any] = response.json()
    return document


def test_the_schema_lists_the_registries_traces_and_catalog(guarded: ServerThread) -> None:
    paths = schema_of(guarded)["paths"]
    assert set(paths["/v1/toolgraph/tools"]) == {"get", "post"}
    assert set(paths["/v1/toolgraph/tools/{key}"]) == {"get", "delete"}
    assert set(paths["/v1/toolgraph/mcp/servers"]) == {"get", "post"}
    assert set(paths["/v1/toolgraph/mcp/servers/{name}/sync"]) == {"post"}
    assert set(paths["/v1/toolgraph/traces/{trace_id}"]) == {"get"}
    params = {p["name"] for p in paths["/v1/toolgraph/traces"]["get"]["parameters"]}
    assert params == {"limit", "outcome", "tool", "min_seconds"}
    for path in ("/v1/toolgraph/catalog/search", "/v1/toolgraph/catalog/tools/{name}"):
        assert "get" in paths[path]
    # OpenAI's routes are described by OpenAI's reference, not here.
    assert "/v1/chat/completions" not in paths
    assert "/mcp" not in paths


def test_each_operation_names_the_key_it_needs(guarded: ServerThread) -> None:
    schema = schema_of(guarded)
    assert set(schema["components"]["securitySchemes"]) == {"master_key", "admin_key"}
    paths = schema["paths"]
    assert paths["/v1/toolgraph/tools"]["post"]["security"] == [{"admin_key": []}]
    assert paths["/v1/toolgraph/mcp/servers"]["get"]["security"] == [{"admin_key": []}]
    assert paths["/v1/toolgraph/traces"]["get"]["security"] == [{"master_key": []}]
    assert paths["/v1/models"]["get"]["security"] == [{"master_key": []}]
    assert "security" not in paths["/healthz"]["get"]


def test_bodies_and_errors_have_the_shapes_the_server_uses(guarded: ServerThread) -> None:
    schema = schema_of(guarded)
    components = schema["components"]["schemas"]
    register = schema["paths"]["/v1/toolgraph/tools"]["post"]
    body = register["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/RegisterTools"}
    assert {"openai", "openapi", "openapi_url"} <= set(components["RegisterTools"]["properties"])
    refs = re.findall(r'"\$ref": "#/components/schemas/(\w+)"', str(schema).replace("'", '"'))
    assert set(refs) <= set(components)  # every reference resolves
    assert "HTTPValidationError" not in components
    for operations in schema["paths"].values():
        for operation in operations.values():
            assert "422" not in operation["responses"]
    assert set(register["responses"]) >= {"400", "401", "403"}
    error = components["Error"]["properties"]["error"]
    assert error["required"] == ["message", "type"]


def test_the_schema_and_docs_are_open_but_the_routes_keep_their_keys(
    guarded: ServerThread,
) -> None:
    # With a master key set, a caller without a key reads the description of the API
    # (it holds no data, like the console's page) and Swagger UI's page, and nothing else.
    page = httpx.get(f"{guarded.url}/docs", timeout=30)
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert "/openapi.json" in page.text
    assert "SwaggerUIBundle" in page.text
    schema = schema_of(guarded)
    checked = 0
    for path, operations in schema["paths"].items():
        if "get" not in operations or path == "/readyz":  # readyz answers 503 while loading
            continue
        url = guarded.url + re.sub(r"\{[^}]+\}", "x", path)
        response = httpx.get(url, params={"q": "weather"}, timeout=30)
        if "security" in operations["get"]:
            assert response.status_code == 401, path
            assert response.json()["error"]["type"] == "authentication_error"
        else:
            assert response.status_code == 200, path
        checked += 1
    assert checked >= 10
    # The master key does not open the admin routes the schema marks admin_key.
    with_master = httpx.get(
        f"{guarded.url}/v1/toolgraph/tools",
        headers={"authorization": f"Bearer {MASTER}"},
        timeout=30,
    )
    assert with_master.status_code == 401
