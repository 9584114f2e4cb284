"""Every error reaches the client in OpenAI's shape, with the right status."""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from typing import Any

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from testing.fake_upstream import FakeUpstream, Script
from tests.conftest import ServerThread, free_port
from tests.proxy.test_chat_passthrough import UPSTREAM_KEY, sdk, user

CHAT = "/v1/chat/completions"


def post(server: ServerThread, content: bytes | str, **headers: str) -> httpx.Response:
    return httpx.post(
        f"{server.url}{CHAT}",
        content=content,
        headers={"content-type": "application/json", **headers},
        timeout=20,
    )


def error_of(response: httpx.Response) -> dict[str, Any]:
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"message", "type", "param", "code"}
    return dict(body["error"])


def body(**fields: Any) -> str:
    """A valid request with ``fields`` changed; ``None`` removes a field."""
    request = {"model": "m", "messages": [{"role": "user", "content": "x"}]} | fields
    return json.dumps({k: v for k, v in request.items() if v is not None})


BAD_TOOL = [{"type": "function", "function": {}}]


@pytest.mark.parametrize(
    ("raw", "param", "code"),
    [
        ('{"model": "m", "messages": [', None, "invalid_json"),
        ("", None, "invalid_json"),
        ("[1, 2]", None, "invalid_type"),
        (body(messages=None), "messages", "missing_required_parameter"),
        (body(model=None), "model", "missing_required_parameter"),
        (body(messages="hello"), "messages", "invalid_type"),
        (body(messages=[]), "messages", "invalid_value"),
        (body(messages=[{"role": "robot", "content": "x"}]), "messages.[0].role", "invalid_value"),
        (body(messages=[{"role": "user", "content": 7}]), "messages.[0].content", "invalid_type"),
        (body(model=5), "model", "invalid_type"),
        (body(stream="yes"), "stream", "invalid_type"),
        (body(temperature=9), "temperature", "invalid_value"),
        (body(tools=BAD_TOOL), "tools.[0].function.name", "missing_required_parameter"),
        (body(toolgraph={"mode": "teleport"}), "toolgraph.mode", "invalid_value"),
    ],
)
def test_bad_requests_get_400_naming_the_field(
    proxy: ServerThread, upstream: FakeUpstream, raw: str, param: str | None, code: str
) -> None:
    response = post(proxy, raw)

    assert response.status_code == 400
    error = error_of(response)
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param
    assert error["code"] == code
    assert upstream.requests == []


def test_bad_request_raises_the_sdks_own_exception(proxy: ServerThread) -> None:
    with pytest.raises(openai.BadRequestError) as raised:
        sdk(proxy).chat.completions.create(model="m", messages=[{"role": "robot", "content": "x"}])  # type: ignore[misc, list-item]
    assert raised.value.status_code == 400
    assert raised.value.param == "messages.[0].role"


def test_oversized_body_gets_413(start_proxy: Any, upstream: FakeUpstream) -> None:
    server = start_proxy(limits={"max_body_bytes": 2000})
    big = '{"model": "m", "messages": [{"role": "user", "content": "' + "x" * 5000 + '"}]}'

    response = post(server, big)
    assert response.status_code == 413
    assert error_of(response)["code"] == "request_too_large"

    chunked = httpx.post(
        f"{server.url}{CHAT}",
        content=iter([big.encode()[:1500], big.encode()[1500:]]),
        headers={"content-type": "application/json"},
        timeout=20,
    )
    assert chunked.status_code == 413
    assert upstream.requests == []


def test_too_many_messages_and_tools_name_the_field(start_proxy: Any) -> None:
    server = start_proxy(limits={"max_messages": 2, "max_tools": 1})
    tool = {"type": "function", "function": {"name": "f"}}
    with pytest.raises(openai.BadRequestError) as raised:
        sdk(server).chat.completions.create(model="m", messages=user("a") * 3)
    assert raised.value.param == "messages"
    with pytest.raises(openai.BadRequestError) as raised:
        sdk(server).chat.completions.create(model="m", messages=user("a"), tools=[tool, tool])  # type: ignore[list-item]
    assert raised.value.param == "tools"


def test_unknown_route_and_method_are_openai_errors(proxy: ServerThread) -> None:
    missing = httpx.post(f"{proxy.url}/v1/embeddings-nope", json={}, timeout=10)
    assert missing.status_code == 404
    assert error_of(missing)["code"] == "unknown_url"
    wrong_method = httpx.get(f"{proxy.url}{CHAT}", timeout=10)
    assert wrong_method.status_code == 405
    assert error_of(wrong_method)["type"] == "invalid_request_error"


@pytest.mark.parametrize("stream", [False, True])
def test_upstream_errors_keep_their_status_and_message(
    proxy: ServerThread, upstream: FakeUpstream, stream: bool
) -> None:
    detail = {
        "message": "This model's maximum context length is 8192 tokens.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
    upstream.enqueue(Script(status=400, error=detail))
    with pytest.raises(openai.BadRequestError) as raised:
        sdk(proxy).chat.completions.create(model="m", messages=user("x"), stream=stream)
    assert raised.value.status_code == 400
    assert raised.value.body == detail


def test_rate_limits_keep_retry_after(proxy: ServerThread, upstream: FakeUpstream) -> None:
    upstream.enqueue(
        Script(
            status=429,
            error={
                "message": "Rate limit reached",
                "type": "requests",
                "code": "rate_limit_exceeded",
            },
            headers={"retry-after": "7", "x-ratelimit-remaining-requests": "0"},
        )
    )
    with pytest.raises(openai.RateLimitError) as raised:
        sdk(proxy).chat.completions.create(model="m", messages=user("x"))
    assert raised.value.response.headers["retry-after"] == "7"
    assert raised.value.response.headers["x-ratelimit-remaining-requests"] == "0"
    assert raised.value.code == "rate_limit_exceeded"


def test_non_json_upstream_error_is_wrapped(proxy: ServerThread, upstream: FakeUpstream) -> None:
    upstream.enqueue(Script(status=503, raw_body=b"<html>backend overloaded</html>"))
    with pytest.raises(openai.InternalServerError) as raised:
        sdk(proxy).chat.completions.create(model="m", messages=user("x"))
    assert raised.value.status_code == 503
    assert "backend overloaded" in raised.value.message


def test_upstream_error_never_echoes_a_key(proxy: ServerThread, upstream: FakeUpstream) -> None:
    echoed = f"Incorrect API key provided: {UPSTREAM_KEY[:12]}...{UPSTREAM_KEY[-4:]}."
    upstream.enqueue(Script(status=401, error={"message": echoed, "type": "invalid_request_error"}))
    response = post(proxy, '{"model": "m", "messages": [{"role": "user", "content": "x"}]}')
    assert response.status_code == 401
    assert UPSTREAM_KEY[:12] not in response.text
    assert "Incorrect API key provided" in response.text


@pytest.mark.parametrize("stream", [False, True])
def test_no_field_or_forwarded_header_echoes_a_key(
    proxy: ServerThread, upstream: FakeUpstream, stream: bool
) -> None:
    echoed = f"{UPSTREAM_KEY[:10]}...{UPSTREAM_KEY[-4:]}"
    detail = {"message": "denied", "type": f"t_{echoed}", "param": echoed, "code": echoed}
    headers = {"retry-after": echoed, "x-ratelimit-limit-requests": f"60 for {echoed}"}
    upstream.enqueue(Script(status=429, error=detail, headers=headers))
    upstream.enqueue(Script(headers=headers, text="fine"))
    with sdk(proxy) as client:
        with pytest.raises(openai.RateLimitError) as raised:
            client.chat.completions.create(model="m", messages=user("x"), stream=stream)
        answered = client.chat.completions.with_raw_response.create(
            model="m", messages=user("x"), stream=stream
        )
        responses = (raised.value.response, answered.http_response)
        seen = [response.read() + str(response.headers.raw).encode() for response in responses]
        answered.http_response.close()

    assert all(UPSTREAM_KEY[:6].encode() not in text for text in seen)
    for response in responses:
        assert response.headers["x-ratelimit-limit-requests"] == "60 for ***"
    assert raised.value.body == {
        "message": "denied",
        "type": "t_***",
        "param": "***",
        "code": "***",
    }


@pytest.mark.parametrize("stream", [False, True])
def test_unreachable_upstream_is_502(start_proxy: Any, stream: bool) -> None:
    server = start_proxy(upstream_base_url=f"http://127.0.0.1:{free_port()}/v1")
    with pytest.raises(openai.APIStatusError) as raised:
        sdk(server).chat.completions.create(model="m", messages=user("x"), stream=stream)
    assert raised.value.status_code == 502
    assert raised.value.code == "upstream_unreachable"
    assert "Traceback" not in raised.value.response.text


@pytest.mark.parametrize("stream", [False, True])
def test_hung_upstream_is_504(start_proxy: Any, upstream: FakeUpstream, stream: bool) -> None:
    server = start_proxy(timeouts={"upstream_read": 0.5})
    upstream.enqueue(Script(hang=True))
    # A 504 at all shows the proxy's own read timeout fired: without it the SDK's
    # client timeout (60 s) would raise APITimeoutError instead.
    with pytest.raises(openai.APIStatusError) as raised:
        sdk(server).chat.completions.create(model="m", messages=user("x"), stream=stream)
    assert raised.value.status_code == 504
    assert raised.value.code == "upstream_timeout"


def test_request_deadline_is_504(start_proxy: Any, upstream: FakeUpstream) -> None:
    server = start_proxy(timeouts={"request": 0.5})
    upstream.enqueue(Script(delay=3))
    with pytest.raises(openai.APIStatusError) as raised:
        sdk(server).chat.completions.create(model="m", messages=user("x"))
    assert raised.value.status_code == 504


def test_upstream_breaking_off_mid_stream_ends_with_an_error_event(
    proxy: ServerThread, upstream: FakeUpstream
) -> None:
    seen = threading.Event()
    upstream.enqueue(Script(text="a b c d e f", drop_after_events=3, drop_when=seen))
    with httpx.stream(
        "POST",
        f"{proxy.url}{CHAT}",
        json={"model": "m", "stream": True, "messages": user("x")},
        timeout=20,
    ) as response:
        assert response.status_code == 200
        events = []
        for line in response.iter_lines():
            events += [line] if line else []
            if len(events) == 3:
                seen.set()  # the upstream breaks off only once all three came through

    assert len(events) == 4
    assert all(event.startswith("data: {") for event in events)
    assert '"error"' in events[-1]
    assert "broke off while streaming" in events[-1]
    assert "[DONE]" not in events[-1]
    upstream.enqueue(Script(text="a b c d e f", drop_after_events=3))  # no wait: the error
    stream = sdk(proxy).chat.completions.create(model="m", messages=user("x"), stream=True)
    with pytest.raises(openai.APIError, match="broke off while streaming"):
        list(stream)


def test_client_disconnect_closes_the_upstream_call(
    proxy: ServerThread, upstream: FakeUpstream
) -> None:
    upstream.enqueue(Script(text="a b c", hang_after_events=2))
    with httpx.stream(
        "POST",
        f"{proxy.url}{CHAT}",
        json={"model": "m", "stream": True, "messages": user("x")},
        timeout=20,
    ) as response:
        next(response.iter_lines())
    deadline = time.monotonic() + 10
    while upstream.disconnects == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert upstream.disconnects == 1


@pytest.mark.parametrize("stream", [False, True])
def test_client_leaving_before_the_answer_cancels_the_upstream_call(
    proxy: ServerThread, upstream: FakeUpstream, stream: bool
) -> None:
    upstream.enqueue(Script(hang=True))
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(
            f"{proxy.url}{CHAT}",
            json={"model": "m", "stream": stream, "messages": user("x")},
            timeout=httpx.Timeout(5, read=0.5),
        )
    deadline = time.monotonic() + 10
    while upstream.disconnects == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert upstream.disconnects == 1
    metrics = httpx.get(f"{proxy.url}/metrics", timeout=10).text
    assert 'route="/v1/chat/completions",status="499"' in metrics


def test_a_client_gone_mid_upload_is_a_499_without_a_traceback(
    proxy: ServerThread, caplog: pytest.LogCaptureFixture
) -> None:
    def closed() -> float:
        metrics = httpx.get(f"{proxy.url}/metrics", timeout=10).text
        for family in text_string_to_metric_families(metrics):
            for sample in family.samples:
                if sample.name == "toolgraph_http_requests_total" and sample.labels == {
                    "route": CHAT,
                    "mode": "none",
                    "status": "499",
                }:
                    return sample.value
        return 0.0

    before = closed()
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as sock:
        sock.sendall(
            f"POST {CHAT} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
            'content-length: 1000\r\n\r\n{"model":'.encode()
        )
    deadline = time.monotonic() + 10
    while closed() == before and time.monotonic() < deadline:
        time.sleep(0.02)

    assert closed() == before + 1
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []
