"""A scripted fake of the OpenAI and Anthropic HTTP APIs, for tests, benchmarks and offline runs.

Map:
- steps: an `LLMReply` (rendered in the wire format of the endpoint hit — build it with the
  `scripted_llm` builders), `http_error(...)` (status, the provider's real error body, headers
  such as `Retry-After` / `retry-after-ms`), `error_in_body(...)` (a 200 whose body is an error
  object, as when a stream fails midway with `overloaded_error`), or `delayed(step, s)`.
- `ScriptedAPI`: the Starlette app. `POST /v1/chat/completions` speaks OpenAI, `POST /v1/messages`
  speaks Anthropic. It records every parsed request body (`.requests`), consumes the script in
  order, then asks the `responder(request_json) -> step`, if any (load tests, benchmarks). With
  `error_rate` it injects `injected_error` first, drawn from a seeded RNG, without consuming a step.
  Usage is computed from the request: ~4 characters a token, and cached tokens = the part of the
  serialised prompt (tools, system, messages) unchanged since the previous request, so a stable
  prefix shows up as caching.
- `ScriptedServer`: runs the app under uvicorn in a thread on 127.0.0.1 and a free port, as a sync
  or async context manager; `.base_url` for OpenAI SDKs (`…/v1`), `.anthropic_base_url` for
  Anthropic's (no `/v1`), `.stop()` and `.kill()` (the provider dies mid-run).

A request beyond the script with no responder gets HTTP 418 — permanent, so the test fails fast —
and `assert_complete()` reports it.
"""

from __future__ import annotations

import asyncio
import json
import random
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from reasoning_service.models.conversation import LLMReply, StopReason, ToolCall

__all__ = [
    "API",
    "Delayed",
    "ErrorInBody",
    "HTTPError",
    "RecordedRequest",
    "Responder",
    "ScriptedAPI",
    "ScriptedServer",
    "ServerStep",
    "delayed",
    "error_in_body",
    "http_error",
    "overloaded",
    "rate_limited",
]

API = Literal["openai", "anthropic"]


@dataclass(frozen=True, slots=True)
class HTTPError:
    """Answer with this status and the provider's error body; `error_type` defaults by status."""

    status: int
    message: str = "scripted error"
    error_type: str | None = None
    code: str | None = None
    """OpenAI `error.code`; Anthropic `error.details.error_code`."""
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ErrorInBody:
    """HTTP 200 with an error object as the body: a stream that failed after it started."""

    error_type: str = "overloaded_error"
    message: str = "Overloaded"


@dataclass(frozen=True, slots=True)
class Delayed:
    """Wait `delay_s` (or until the client hangs up), then answer with `step`."""

    step: ServerStep
    delay_s: float


ServerStep = LLMReply | HTTPError | ErrorInBody | Delayed
Responder = Callable[[dict[str, Any]], ServerStep]


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One request the server received."""

    api: API
    body: dict[str, Any]
    headers: dict[str, str]

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages", []))


def http_error(
    status: int,
    message: str = "scripted error",
    *,
    error_type: str | None = None,
    code: str | None = None,
    retry_after: str | float | None = None,
    retry_after_ms: float | None = None,
    headers: Mapping[str, str] | None = None,
) -> HTTPError:
    """An error answer; `retry_after` becomes `Retry-After` (seconds or an HTTP date)."""
    all_headers = dict(headers or {})
    if retry_after is not None:
        all_headers["Retry-After"] = str(retry_after)
    if retry_after_ms is not None:
        all_headers["retry-after-ms"] = str(retry_after_ms)
    return HTTPError(status, message, error_type, code, all_headers)


def rate_limited(retry_after: float | None = None) -> HTTPError:
    return http_error(429, "Rate limit reached, slow down.", retry_after=retry_after)


def overloaded() -> HTTPError:
    """Anthropic's 529 `overloaded_error`."""
    return http_error(529, "Overloaded", error_type="overloaded_error")


def error_in_body(error_type: str = "overloaded_error", message: str = "Overloaded") -> ErrorInBody:
    return ErrorInBody(error_type, message)


def delayed(step: ServerStep, delay_s: float) -> Delayed:
    return Delayed(step, delay_s)


# --- the app -------------------------------------------------------------------------------------


class ScriptedAPI:
    """The ASGI app and its state; see the module docstring."""

    def __init__(
        self,
        steps: Iterable[ServerStep] = (),
        *,
        responder: Responder | None = None,
        latency_s: float = 0.0,
        error_rate: float = 0.0,
        injected_error: ServerStep | None = None,
        seed: int = 0,
    ) -> None:
        self._steps = list(steps)
        self._next = 0
        self._responder = responder
        self._latency_s = latency_s
        self._error_rate = error_rate
        self._injected_error = injected_error or http_error(503, "injected failure")
        self._rng = random.Random(seed)
        self._previous_prompt: dict[API, str] = {}
        self.requests: list[RecordedRequest] = []
        self.unexpected_requests = 0
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._openai, methods=["POST"]),
                Route("/v1/messages", self._anthropic, methods=["POST"]),
            ]
        )

    def push(self, *steps: ServerStep) -> None:
        """Append steps to the script."""
        self._steps.extend(steps)

    def reset(self, steps: Iterable[ServerStep] = ()) -> None:
        """Start over with a new script: forget requests, prompts and unused steps."""
        self._steps, self._next = list(steps), 0
        self._previous_prompt.clear()
        self.requests.clear()
        self.unexpected_requests = 0

    @property
    def remaining(self) -> int:
        return len(self._steps) - self._next

    def assert_complete(self) -> None:
        """Fail if steps were left over or requests came after the script ran out."""
        if self.remaining or self.unexpected_requests:
            raise AssertionError(
                f"{self.remaining} scripted steps unused, "
                f"{self.unexpected_requests} requests beyond the script"
            )

    async def _openai(self, request: Request) -> JSONResponse:
        return await self._handle(request, "openai")

    async def _anthropic(self, request: Request) -> JSONResponse:
        return await self._handle(request, "anthropic")

    async def _handle(self, request: Request, api: API) -> JSONResponse:
        body = await request.json()
        self.requests.append(RecordedRequest(api, body, dict(request.headers)))
        step = self._choose_step(body)
        if self._latency_s:
            await _sleep_unless_disconnected(request, self._latency_s)
        while isinstance(step, Delayed):
            await _sleep_unless_disconnected(request, step.delay_s)
            step = step.step
        if isinstance(step, HTTPError):
            headers = {"x-request-id": f"req_{uuid.uuid4().hex[:8]}", **step.headers}
            return JSONResponse(_error_body(api, step), status_code=step.status, headers=headers)
        if isinstance(step, ErrorInBody):
            return JSONResponse(_error_body(api, HTTPError(200, step.message, step.error_type)))
        usage = self._usage(api, body, step)
        render = _render_openai if api == "openai" else _render_anthropic
        return JSONResponse(render(step, body.get("model", ""), usage))

    def _choose_step(self, body: dict[str, Any]) -> ServerStep:
        if self._error_rate and self._rng.random() < self._error_rate:
            return self._injected_error
        if self._next < len(self._steps):
            self._next += 1
            return self._steps[self._next - 1]
        if self._responder is not None:
            return self._responder(body)
        self.unexpected_requests += 1
        return http_error(418, f"ScriptedServer: no step left for request #{len(self.requests)}")

    def _usage(self, api: API, body: dict[str, Any], reply: LLMReply) -> _WireUsage:
        prompt = _serialise_prompt(body)
        previous = self._previous_prompt.get(api, "")
        self._previous_prompt[api] = prompt
        cached_chars = _common_prefix_length(previous, prompt)
        completion = len(reply.content) + sum(
            len(c.name) + len(c.arguments_json) for c in reply.tool_calls
        )
        return _WireUsage(
            prompt_tokens=len(prompt) // 4 + 1,
            cached_tokens=cached_chars // 4,
            completion_tokens=completion // 4 + 1,
        )


def _common_prefix_length(a: str, b: str) -> int:
    length = min(len(a), len(b))
    return next((i for i in range(length) if a[i] != b[i]), length)


async def _sleep_unless_disconnected(request: Request, delay_s: float) -> None:
    """Sleep in slices, giving up when the client hangs up (so shutdown is never held up)."""
    deadline = time.monotonic() + delay_s
    while (left := deadline - time.monotonic()) > 0:
        await asyncio.sleep(min(left, 0.05))
        if await request.is_disconnected():
            return


@dataclass(frozen=True, slots=True)
class _WireUsage:
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int


def _serialise_prompt(body: dict[str, Any]) -> str:
    """Tools, system and messages in the order providers cache them, one stable string."""
    parts = [json.dumps(body.get("tools", []), sort_keys=True)]
    if "system" in body:
        parts.append(json.dumps(body["system"], sort_keys=True))
    parts += [json.dumps(message, sort_keys=True) for message in body.get("messages", [])]
    return "\n".join(parts)


# --- wire formats ---------------------------------------------------------------------------

_OPENAI_FINISH = {
    StopReason.END_TURN: "stop",
    StopReason.TOOL_CALLS: "tool_calls",
    StopReason.MAX_TOKENS: "length",
    StopReason.REFUSAL: "content_filter",
    StopReason.OTHER: "stop",
}
_ANTHROPIC_STOP = {
    StopReason.END_TURN: "end_turn",
    StopReason.TOOL_CALLS: "tool_use",
    StopReason.MAX_TOKENS: "max_tokens",
    StopReason.REFUSAL: "refusal",
    StopReason.OTHER: "end_turn",
}
_OPENAI_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "permission_error",
    404: "invalid_request_error",
    429: "requests",
}
_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    409: "conflict_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def _render_openai(reply: LLMReply, model: str, usage: _WireUsage) -> dict[str, Any]:
    refused = reply.stop_reason is StopReason.REFUSAL
    message: dict[str, Any] = {
        "role": "assistant",
        "content": None if refused else (reply.content or None),
        "refusal": reply.content if refused else None,
    }
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments_json},
            }
            for call in reply.tool_calls
        ]
    stop = reply.stop_reason
    if reply.tool_calls and stop is StopReason.END_TURN:
        stop = StopReason.TOOL_CALLS
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": reply.model or model,
        "choices": [{"index": 0, "message": message, "finish_reason": _OPENAI_FINISH[stop]}],
        "usage": {
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "total_tokens": usage.prompt_tokens + usage.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": usage.cached_tokens},
        },
    }


def _render_anthropic(reply: LLMReply, model: str, usage: _WireUsage) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if reply.content:
        content.append({"type": "text", "text": reply.content})
    content += [
        {"type": "tool_use", "id": call.id, "name": call.name, "input": _tool_input(call)}
        for call in reply.tool_calls
    ]
    stop = reply.stop_reason
    if reply.tool_calls and stop is StopReason.END_TURN:
        stop = StopReason.TOOL_CALLS
    return {
        "id": f"msg_{uuid.uuid4().hex[:12]}",
        "type": "message",
        "role": "assistant",
        "model": reply.model or model,
        "content": content,
        "stop_reason": _ANTHROPIC_STOP[stop],
        "stop_sequence": None,
        "usage": {
            "input_tokens": usage.prompt_tokens - usage.cached_tokens,
            "output_tokens": usage.completion_tokens,
            "cache_read_input_tokens": usage.cached_tokens,
            "cache_creation_input_tokens": 0,
        },
    }


def _tool_input(call: ToolCall) -> dict[str, Any]:
    try:
        parsed = json.loads(call.arguments_json)
    except json.JSONDecodeError:
        return {"_unparsed_arguments": call.arguments_json}
    return parsed if isinstance(parsed, dict) else {"_unparsed_arguments": call.arguments_json}


def _error_body(api: API, error: HTTPError) -> dict[str, Any]:
    if api == "openai":
        default = "server_error" if error.status >= 500 else "invalid_request_error"
        return {
            "error": {
                "message": error.message,
                "type": error.error_type or _OPENAI_ERROR_TYPES.get(error.status, default),
                "param": None,
                "code": error.code,
            }
        }
    detail: dict[str, Any] = {
        "type": error.error_type or _ANTHROPIC_ERROR_TYPES.get(error.status, "api_error"),
        "message": error.message,
    }
    if error.code is not None:
        detail["details"] = {"error_code": error.code}
    return {"type": "error", "error": detail, "request_id": f"req_{uuid.uuid4().hex[:8]}"}


# --- the server -----------------------------------------------------------------------------


class ScriptedServer:
    """`ScriptedAPI` served by uvicorn on 127.0.0.1 in a background thread.

    ```python
    with ScriptedServer([tool_call("facts_get", {"field": "age"}), finish()]) as server:
        sdk = openai.AsyncOpenAI(api_key="test", base_url=server.base_url, max_retries=0)
    ```
    """

    __test__ = False

    def __init__(
        self,
        steps: Iterable[ServerStep] = (),
        *,
        responder: Responder | None = None,
        latency_s: float = 0.0,
        error_rate: float = 0.0,
        injected_error: ServerStep | None = None,
        seed: int = 0,
    ) -> None:
        self.api = ScriptedAPI(
            steps,
            responder=responder,
            latency_s=latency_s,
            error_rate=error_rate,
            injected_error=injected_error,
            seed=seed,
        )
        self._socket: socket.socket | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        """For OpenAI SDKs: `http://127.0.0.1:PORT/v1`."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def anthropic_base_url(self) -> str:
        """For the Anthropic SDK, which adds `/v1/messages` itself."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def requests(self) -> list[RecordedRequest]:
        return self.api.requests

    def push(self, *steps: ServerStep) -> None:
        self.api.push(*steps)

    def reset(self, steps: Iterable[ServerStep] = ()) -> None:
        """Reuse a running server for another test (starting one costs ~0.2 s)."""
        self.api.reset(steps)

    def assert_complete(self) -> None:
        self.api.assert_complete()

    def start(self) -> ScriptedServer:
        """Bind a free port, start serving, and return once the server accepts connections."""
        if self._thread is not None:
            raise RuntimeError("ScriptedServer already started")
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind(("127.0.0.1", 0))
        self.port = self._socket.getsockname()[1]
        config = uvicorn.Config(self.api.app, lifespan="off", log_level="warning", access_log=False)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("ScriptedServer did not start")
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        """Shut down gracefully: in-flight requests finish (delays end early on hang-up)."""
        self._shutdown(force=False)

    def kill(self) -> None:
        """Stop at once, dropping in-flight requests: the provider died mid-run."""
        self._shutdown(force=True)

    def _shutdown(self, *, force: bool) -> None:
        if self._server is None or self._thread is None:
            return
        self._server.force_exit = force
        self._server.should_exit = True
        self._thread.join(timeout=5)
        if self._thread.is_alive():
            self._server.force_exit = True
            self._thread.join(timeout=5)
        if self._socket is not None:
            self._socket.close()

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    async def __aenter__(self) -> ScriptedServer:
        return await asyncio.to_thread(self.start)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await asyncio.to_thread(self.stop)
