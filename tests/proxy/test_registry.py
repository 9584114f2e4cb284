"""The tool registry API: admin-only, checks a new tool by calling it, stores it."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from proxy.protocol.body import ON_LOOP_BYTES
from proxy.registry.fetch import anchored
from proxy.registry.protocol import RegisterTools
from tests.conftest import ServerThread, free_port

ADMIN = "tg-admin-key-0123456789"
TOOLS = "/v1/toolgraph/tools"


#: An OpenAPI document of the weather API, in YAML, with no ``servers``: the API is
#: where the document is.
WEATHER_YAML = b"""openapi: 3.0.3
info: {title: Weather, version: "1", x-released: 2026-11-24}
paths:
  /weather/{city}:
    get:
      operationId: cityWeather
      summary: Current weather in a city
      parameters:
        - {name: city, in: path, required: true, schema: {type: string, example: Oslo}}
      responses: {"200": {description: ok}}
"""
#: What the weather server's /docs/ serves besides the API: (content type, body).
DOCUMENTS = {
    "/docs/weather.yaml": ("application/yaml", WEATHER_YAML),
    "/docs/page.html": ("text/html", b"<html><body>{not: [a, document</body></html>"),
    "/docs/list.json": ("application/json", b"[1, 2]"),
    "/docs/bomb.yaml": ("application/yaml", b"a: &a [x, x]\nb: &b [*a, *a]\nc: [*b, *b]\n"),
}


class _WeatherHandler(BaseHTTPRequestHandler):
    """GET /weather/{city}: 200 for known cities, 404 for the rest; GET /docs/…: the
    documents above (404 for others)."""

    def do_GET(self) -> None:
        if self.path.startswith("/docs/"):
            self._document()
            return
        city = self.path.split("?")[0].rsplit("/", 1)[-1]
        known = city in ("Paris", "Oslo")
        body = json.dumps({"city": city, "celsius": 12} if known else {"error": "unknown city"})
        self.send_response(200 if known else 404)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    def _document(self) -> None:
        kind, body = DOCUMENTS.get(self.path, ("text/plain", b"no such document"))
        self.send_response(200 if self.path in DOCUMENTS else 404)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def weather_api() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _WeatherHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def weather_spec(base: str, name: str = "get_weather", group: str = "weather") -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": "Current weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
            "x-group": group,
            "x-endpoint": {"method": "GET", "url": f"{base}/weather/{{city}}"},
        },
    }


@pytest.fixture
def registry(start_proxy: Any) -> ServerThread:
    server: ServerThread = start_proxy(
        admin_key=ADMIN, executor={"allow_private_networks": True, "retries": 0}
    )
    return server


def call(server: ServerThread, method: str, path: str = "", **kwargs: Any) -> httpx.Response:
    headers = {"authorization": f"Bearer {ADMIN}", **kwargs.pop("headers", {})}
    return httpx.request(
        method, f"{server.url}{TOOLS}{path}", headers=headers, timeout=20, **kwargs
    )


def test_the_registry_is_closed_without_an_admin_key(proxy: ServerThread) -> None:
    response = httpx.get(f"{proxy.url}{TOOLS}", timeout=10)
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "registry_disabled"


def test_the_registry_wants_the_admin_key(registry: ServerThread) -> None:
    wrong = call(registry, "GET", headers={"authorization": "Bearer tg-not-it"})
    assert wrong.status_code == 401
    assert call(registry, "GET").json() == {"object": "list", "data": []}


def test_a_tool_is_called_then_stored_and_survives_a_restart(
    registry: ServerThread, weather_api: str, start_proxy: Any
) -> None:
    added = call(
        registry,
        "POST",
        json={
            "openai": [weather_spec(weather_api)],
            "test_arguments": {"get_weather": {"city": "Paris"}},
        },
    )
    assert added.status_code == 201, added.text
    assert added.json()["checks"] == [{"tool": "get_weather", "outcome": "passed", "detail": ""}]
    shown = call(registry, "GET", "/get_weather").json()
    assert shown["endpoint"]["url"] == f"{weather_api}/weather/{{city}}"
    assert shown["category"] == "custom"

    registry.__exit__()
    again: ServerThread = start_proxy(admin_key=ADMIN)
    assert [tool["name"] for tool in call(again, "GET").json()["data"]] == ["get_weather"]


def test_made_up_arguments_may_meet_a_4xx(registry: ServerThread, weather_api: str) -> None:
    added = call(
        registry, "POST", json={"openai": [weather_spec(weather_api)], "category": "weather"}
    )
    assert added.status_code == 201, added.text
    check = added.json()["checks"][0]
    assert check["outcome"] == "reachable"
    assert "HTTP 404" in check["detail"]
    assert (
        call(registry, "GET", params={"category": "weather"}).json()["data"][0]["name"]
        == "get_weather"
    )


def test_given_arguments_must_succeed(registry: ServerThread, weather_api: str) -> None:
    refused = call(
        registry,
        "POST",
        json={
            "openai": [weather_spec(weather_api)],
            "test_arguments": {"get_weather": {"city": "Atlantis"}},
        },
    )
    assert refused.status_code == 422
    assert refused.json()["error"]["code"] == "tool_check_failed"
    assert call(registry, "GET").json()["data"] == []


def test_an_unreachable_endpoint_is_refused_and_nothing_stored(
    registry: ServerThread, weather_api: str
) -> None:
    dead = weather_spec(f"http://127.0.0.1:{free_port()}", name="dead_weather")
    refused = call(registry, "POST", json={"openai": [weather_spec(weather_api), dead]})
    assert refused.status_code == 422
    assert "dead_weather" in refused.json()["error"]["message"]
    assert call(registry, "GET").json()["data"] == []


@pytest.mark.parametrize(
    "target", ["127.0.0.1", "169.254.169.254", "[64:ff9b::7f00:1]", "[2002:a9fe:a9fe::1]"]
)
def test_the_test_call_obeys_the_egress_policy(start_proxy: Any, target: str) -> None:
    server: ServerThread = start_proxy(admin_key=ADMIN, executor={"retries": 0, "call_timeout": 2})
    spec = weather_spec(f"http://{target}:{free_port()}")
    refused = call(server, "POST", json={"openai": [spec]})
    assert refused.status_code == 422
    assert "non-public address" in refused.json()["error"]["message"]


def test_dry_run_checks_and_stores_nothing(registry: ServerThread, weather_api: str) -> None:
    checked = call(
        registry,
        "POST",
        params={"dry_run": "true"},
        json={
            "openai": [weather_spec(weather_api)],
            "test_arguments": {"get_weather": {"city": "Oslo"}},
        },
    )
    assert checked.status_code == 200
    assert checked.json()["dry_run"] is True
    assert checked.json()["checks"][0]["outcome"] == "passed"
    assert call(registry, "GET").json()["data"] == []


def test_a_name_held_by_another_tool_is_a_conflict(
    registry: ServerThread, weather_api: str
) -> None:
    assert call(registry, "POST", json={"openai": [weather_spec(weather_api)]}).status_code == 201
    clash = call(registry, "POST", json={"openai": [weather_spec(weather_api, group="other")]})
    assert clash.status_code == 409
    assert clash.json()["error"]["code"] == "name_taken"


def test_re_adding_a_tool_updates_it(registry: ServerThread, weather_api: str) -> None:
    spec = weather_spec(weather_api)
    assert call(registry, "POST", json={"openai": [spec]}).status_code == 201
    spec["function"]["description"] = "Weather, now with more clouds."
    assert call(registry, "POST", json={"openai": [spec]}).status_code == 201
    tools = call(registry, "GET").json()["data"]
    assert [tool["description"] for tool in tools] == ["Weather, now with more clouds."]


def test_an_openapi_document_registers_its_operations(
    registry: ServerThread, weather_api: str
) -> None:
    document = {
        "openapi": "3.1.0",
        "info": {"title": "Weather", "version": "1"},
        "servers": [{"url": weather_api}],
        "paths": {
            "/weather/{city}": {
                "get": {
                    "operationId": "cityWeather",
                    "tags": ["weather"],
                    "parameters": [
                        {
                            "name": "city",
                            "in": "path",
                            "required": True,
                            "schema": {"type": "string", "example": "Oslo"},
                        }
                    ],
                    "responses": {"200": {"description": "ok"}},
                }
            }
        },
    }
    added = call(registry, "POST", json={"openapi": document})
    assert added.status_code == 201, added.text
    assert added.json()["checks"][0]["outcome"] == "passed"  # the schema's example is a real city


def test_an_openapi_document_is_fetched_from_its_url_and_its_api_is_where_it_is(
    registry: ServerThread, weather_api: str
) -> None:
    url = f"{weather_api}/docs/weather.yaml"
    checked = call(registry, "POST", params={"dry_run": "true"}, json={"openapi_url": url})
    assert checked.status_code == 200, checked.text
    assert checked.json()["checks"][0]["outcome"] == "passed"  # GET /weather/Oslo answered
    assert call(registry, "GET").json()["data"] == []
    added = call(registry, "POST", json={"openapi_url": url})
    assert added.status_code == 201, added.text
    (tool,) = call(registry, "GET").json()["data"]
    assert tool["endpoint"]["url"] == f"{weather_api}/weather/{{city}}"
    assert tool["format"] == "openapi"


@pytest.mark.parametrize(
    ("path", "status", "code", "words"),
    [
        ("/docs/missing.json", 422, "openapi_unreachable", "answered HTTP 404"),
        ("/docs/page.html", 400, "invalid_tool", "neither JSON nor YAML"),
        ("/docs/list.json", 400, "invalid_tool", "not a JSON or YAML mapping"),
        ("/docs/bomb.yaml", 400, "invalid_tool", "aliases are not accepted"),
    ],
)
def test_a_url_without_an_openapi_document_says_what_came(
    registry: ServerThread, weather_api: str, path: str, status: int, code: str, words: str
) -> None:
    refused = call(registry, "POST", json={"openapi_url": f"{weather_api}{path}"})
    assert refused.status_code == status, refused.text
    error = refused.json()["error"]
    assert (error["code"], error["param"]) == (code, "openapi_url")
    assert words in error["message"]
    assert call(registry, "GET").json()["data"] == []


@pytest.mark.parametrize(
    ("executor", "words"),
    [
        ({}, "non-public address (127.0.0.1)"),
        (
            {"allow_private_networks": True, "allowed_hosts": ["api.example.com"]},
            "not in the tool catalog's allow-list",
        ),
    ],
)
def test_fetching_a_document_obeys_the_egress_policy(
    start_proxy: Any, weather_api: str, executor: dict[str, Any], words: str
) -> None:
    server: ServerThread = start_proxy(admin_key=ADMIN, executor={"retries": 0, **executor})
    url = f"{weather_api}/docs/weather.yaml"
    refused = call(server, "POST", json={"openapi_url": url})
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert error["code"] == "openapi_unreachable"
    assert error["message"].startswith(f"cannot fetch the OpenAPI document at {url}: the egress")
    assert words in error["message"]


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({}, "invalid_tool"),
        ({"openai": [], "openapi": {}}, "invalid_tool"),
        ({"openapi": {}, "openapi_url": "http://example.com/doc.json"}, "invalid_tool"),
        ({"openapi_url": "file:///etc/passwd"}, "invalid_tool"),
        (
            {
                "openai": [
                    {"type": "function", "function": {"name": "x", "parameters": {"type": "array"}}}
                ]
            },
            "invalid_tool",
        ),
        (
            {"openai": [{"type": "function", "function": {"description": "no name"}}]},
            "invalid_tool",
        ),
        ({"openai": []}, "invalid_tool"),
    ],
)
def test_bad_tool_specs_are_400(registry: ServerThread, body: dict[str, Any], code: str) -> None:
    response = call(registry, "POST", json=body)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == code


def document_with_schemas(schemas: dict[str, Any], server: str) -> dict[str, Any]:
    """The weather API with its ``city`` parameter's schema at ``s0``."""
    city = {"name": "city", "in": "path", "required": True}
    city["schema"] = {"$ref": "#/components/schemas/s0"}
    return {
        "openapi": "3.0.3",
        "info": {"title": "Refs", "version": "1"},
        "servers": [{"url": server}],
        "paths": {"/weather/{city}": {"get": {"operationId": "refs", "parameters": [city]}}},
        "components": {"schemas": schemas},
    }


def fan_out(levels: int, width: int) -> dict[str, Any]:
    """Each schema holds ``width`` references to the next: ``width**levels`` nodes inlined
    from a document of a few KB."""
    schemas: dict[str, Any] = {f"s{levels}": {"type": "string"}}
    for level in range(levels):
        ref = {"$ref": f"#/components/schemas/s{level + 1}"}
        schemas[f"s{level}"] = {
            "type": "object",
            "properties": {f"p{i}": ref for i in range(width)},
        }
    return schemas


def chain(length: int) -> dict[str, Any]:
    schemas: dict[str, Any] = {
        f"s{i}": {"$ref": f"#/components/schemas/s{i + 1}"} for i in range(length)
    }
    schemas[f"s{length}"] = {"type": "string"}
    return schemas


@pytest.mark.parametrize(
    ("schemas", "limit"),
    [(fan_out(6, 8), "more than 100000 schema nodes"), (chain(1200), "deeper than 64 levels")],
    ids=["fan-out", "chain"],
)
def test_references_past_the_inlining_limits_are_400(
    registry: ServerThread, weather_api: str, schemas: dict[str, Any], limit: str
) -> None:
    document = document_with_schemas(schemas, weather_api)
    response = call(registry, "POST", params={"dry_run": "true"}, json={"openapi": document})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_tool"
    assert limit in error["message"]


def test_references_within_the_limits_are_inlined(registry: ServerThread, weather_api: str) -> None:
    document = document_with_schemas(chain(20), weather_api)
    response = call(registry, "POST", params={"dry_run": "true"}, json={"openapi": document})
    assert response.status_code == 200, response.text
    (tool,) = response.json()["data"]
    assert tool["parameters"]["properties"]["city"]["type"] == "string"


def test_delete_removes_a_tool(registry: ServerThread, weather_api: str) -> None:
    call(registry, "POST", json={"openai": [weather_spec(weather_api)]})
    deleted = call(registry, "DELETE", "/get_weather")
    assert deleted.json()["deleted"] is True
    assert call(registry, "GET", "/get_weather").status_code == 404
    assert call(registry, "DELETE", "/get_weather").status_code == 404


def test_server_urls_are_taken_against_the_documents_url() -> None:
    url = "https://api.example.com/specs/v2/openapi.json"
    servers = [{"url": "/v2", "description": "main"}, {"url": "beta"}, {"url": "https://x.org/a"}]
    assert anchored({"openapi": "3.0.0", "servers": servers}, url)["servers"] == [
        {"url": "https://api.example.com/v2", "description": "main"},
        {"url": "https://api.example.com/specs/v2/beta"},
        {"url": "https://x.org/a"},
    ]
    assert anchored({"openapi": "3.0.0"}, url)["servers"] == [{"url": "https://api.example.com/"}]


@pytest.mark.parametrize("levels", [60, 120])
def test_a_deep_schema_sent_whole_is_stored_or_refused_never_a_500(
    start_proxy: Any, levels: int
) -> None:
    # 2 JSON levels a schema level: 120 is within the default limits.max_json_depth, 240
    # within its highest setting
    registry = start_proxy(admin_key=ADMIN, limits={"max_json_depth": 250})
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}}
    spec = {"type": "function", "function": {"name": "deep", "parameters": schema}}
    response = call(registry, "POST", json={"openai": [spec]})
    assert response.status_code in (201, 400), response.text
    if response.status_code == 400:
        assert "nest" in response.json()["error"]["message"]


def test_a_large_body_is_validated_while_the_loop_serves_others(
    registry: ServerThread, weather_api: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The validation of a large body is held until /healthz has answered: on the event
    loop, /healthz would wait on it (and it on /healthz) until the client gave up."""
    entered, release = threading.Event(), threading.Event()
    validate = RegisterTools.model_validate

    def held(body: Any) -> RegisterTools:
        entered.set()
        assert release.wait(120)
        return validate(body)

    monkeypatch.setattr(RegisterTools, "model_validate", held)
    spec = weather_spec(weather_api)
    spec["function"]["description"] += " " * (ON_LOOP_BYTES + 1)
    with ThreadPoolExecutor(1) as pool:
        posted = pool.submit(
            httpx.post,
            f"{registry.url}{TOOLS}",
            params={"dry_run": "true"},
            json={"openai": [spec]},
            headers={"authorization": f"Bearer {ADMIN}"},
            timeout=300,
        )
        try:
            assert entered.wait(120)
            health = httpx.get(f"{registry.url}/healthz", timeout=30)
        finally:
            release.set()
        assert health.status_code == 200
        assert posted.result().status_code == 200
