"""The scripted OpenAI API with the policy-aware agent, as its own process (`python -m …`).

The concurrency benchmark runs it apart from the client and the service so the three never
share a GIL: `python -m reasoning_service.bench.llm_server --port 8001 --delay 1.0`.
"""

from __future__ import annotations

import argparse
import asyncio

import uvicorn
from starlette.types import ASGIApp, Receive, Scope, Send

from reasoning_service.testing.scripted_agent import PolicyAgent
from reasoning_service.testing.scripted_server import ScriptedAPI


def delayed_app(app: ASGIApp, delay_s: float) -> ASGIApp:
    """`app`, answering each HTTP request `delay_s` later: one plain sleep before the body is
    read, instead of `ScriptedAPI(latency_s=…)`'s 50 ms slices that poll for a hang-up (cheap,
    but hundreds of pollers in flight are work the LLM's stand-in should not do)."""

    async def delayed(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and delay_s > 0:
            await asyncio.sleep(delay_s)
        await app(scope, receive, send)

    return delayed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--delay", type=float, default=1.0, help="seconds before each answer")
    args = parser.parse_args(argv)
    uvicorn.run(
        delayed_app(ScriptedAPI(responder=PolicyAgent()).app, args.delay),
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
        access_log=False,
        lifespan="off",
        backlog=4096,
    )


if __name__ == "__main__":
    main()
