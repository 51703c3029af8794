"""`ScriptedServer`: responder mode, seeded error injection and running out of script."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from reasoning_service.testing import (
    ScriptedServer,
    http_error,
    text,
    tool_call,
)


def _post(server: ScriptedServer, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{server.base_url}/chat/completions", json=body, timeout=5)


BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def test_responder_answers_after_the_script() -> None:
    def responder(request: dict[str, Any]) -> Any:
        return text(f"{len(request['messages'])} messages")

    with ScriptedServer([tool_call("facts_get", {"field": "age"})], responder=responder) as server:
        first = _post(server, BODY).json()
        second = _post(server, BODY).json()
    assert first["choices"][0]["finish_reason"] == "tool_calls"
    assert second["choices"][0]["message"]["content"] == "1 messages"
    assert [r.api for r in server.requests] == ["openai", "openai"]


def test_error_injection_is_seeded() -> None:
    def statuses(seed: int) -> list[int]:
        with (
            ScriptedServer(responder=lambda _: text("ok"), error_rate=0.5, seed=seed) as server,
            httpx.Client(base_url=server.base_url) as http,
        ):
            return [http.post("/chat/completions", json=BODY).status_code for _ in range(10)]

    first = statuses(7)
    assert first == statuses(7)
    assert set(first) == {200, 503}


def test_error_bodies_use_the_provider_format_and_headers() -> None:
    with ScriptedServer([http_error(429, retry_after=2), http_error(429)]) as server:
        openai_style = _post(server, BODY)
        anthropic_style = httpx.post(f"{server.anthropic_base_url}/v1/messages", json=BODY)
    assert openai_style.headers["retry-after"] == "2"
    assert openai_style.json()["error"]["message"] == "scripted error"
    assert anthropic_style.json()["type"] == "error"
    assert anthropic_style.json()["error"]["type"] == "rate_limit_error"


async def test_running_out_of_script_is_reported() -> None:
    async with ScriptedServer() as server:
        response = _post(server, BODY)
    assert response.status_code == 418
    with pytest.raises(AssertionError, match="1 requests beyond the script"):
        server.assert_complete()
