"""The add-a-tool form with an OpenAPI document's URL, in a real browser against a real
proxy: the proxy fetches the document from a real local HTTP server under the tools'
egress policy; a host the policy refuses and a page that is no document are said in
words in the form; the document's operation, checked and saved, is found by search."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.conftest import ServerThread, StartProxy
from tests.console.conftest import KEY, OpenConsole
from tests.orchestrate.conftest import ADMIN, LocalTools

pytestmark = pytest.mark.timeout(600)


def queue_api(tools_url: str) -> bytes:
    """An OpenAPI document of one operation: the local tools' /sleep, as a queue."""
    return json.dumps(
        {
            "openapi": "3.0.3",
            "info": {"title": "Trondheim office", "version": "1"},
            "servers": [{"url": tools_url}],
            "paths": {
                "/sleep": {
                    "get": {
                        "operationId": "trondheim_queue",
                        "summary": "Queue length at the Trondheim office",
                        "parameters": [
                            {
                                "name": "label",
                                "in": "query",
                                "required": True,
                                "schema": {"type": "string", "example": "trondheim"},
                            },
                        ],
                        "responses": {"200": {"description": "the queue"}},
                    }
                }
            },
        }
    ).encode()


@pytest.fixture
def documents(local_tools: LocalTools) -> Iterator[str]:
    """A real HTTP server on loopback: /openapi.json (the document), /page.html (not one)."""
    served = {
        "/openapi.json": ("application/json", queue_api(local_tools.url)),
        "/page.html": ("text/html", b"<html><body>{the API: [docs</body></html>"),
    }

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            kind, body = served.get(self.path, ("text/plain", b"not here"))
            self.send_response(200 if self.path in served else 404)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield str(server.server_address[1])
    server.shutdown()
    server.server_close()


def test_a_document_fetched_from_a_url_is_checked_saved_and_found(
    console: OpenConsole, start_proxy: StartProxy, documents: str
) -> None:
    # loopback is allowed, by its address only: "localhost" is a host the policy refuses
    server: ServerThread = start_proxy(
        master_key=KEY,
        admin_key=ADMIN,
        executor={"allow_private_networks": True, "allowed_hosts": ["127.0.0.1"], "retries": 0},
    )
    tab = console(server)
    tab.open()
    tab.page.wait_for_selector("#trace-list, #no-traces")
    tab.go("#/add")
    tab.page.fill("#admin-key", ADMIN)
    tab.page.select_option("#tool-format", "openapi_url")
    assert tab.page.is_hidden("#tool-spec")

    def check(url: str) -> None:
        tab.page.fill("#tool-url", url)
        tab.page.click("#tool-check")

    refused = f"http://localhost:{documents}/openapi.json"
    check(refused)
    error = tab.page.wait_for_selector("#tool-result .error")
    assert error.inner_text() == (
        f"cannot fetch the OpenAPI document at {refused}: the egress policy refuses it:"
        " host localhost is not in the tool catalog's allow-list"
    )
    assert tab.page.is_disabled("#tool-save")

    check(f"http://127.0.0.1:{documents}/page.html")
    tab.page.wait_for_selector("#tool-result .error:has-text('neither JSON nor YAML')")
    assert tab.page.is_disabled("#tool-save")

    check(f"http://127.0.0.1:{documents}/openapi.json")
    tab.page.wait_for_selector("#tool-result li[data-tool=trondheim_queue] .badge.passed")
    tab.shot("add-openapi-url")
    tab.page.click("#tool-save")
    tab.page.wait_for_selector("#tool-result li[data-tool=trondheim_queue] a")

    tab.go("#/catalog?q=queue%20length%20at%20the%20Trondheim%20office")
    tab.page.wait_for_selector("#search-results [data-method=hybrid] li")
    assert "trondheim_queue" in tab.page.inner_text(
        "#search-results [data-method=hybrid] li:first-child"
    )
    tab.page.click("#search-results [data-method=hybrid] li:first-child a")
    tab.page.wait_for_selector("h1 code")
    assert tab.page.inner_text("h1 code") == "trondheim_queue"
    assert "openapi" in tab.page.inner_text(".facts")
    # the two refusals were answered 422 and 400 (which chromium logs too); nothing else
    logged = [e for e in tab.errors if e.startswith("console: ")]
    assert [e.split(":")[0] for e in tab.errors if e not in logged] == ["422", "400"]
    assert all(re.search(r"status of (422|400)\b", e) for e in logged), tab.errors
