"""The scripted OpenAI API with the policy-aware agent, as its own process (`python -m …`).

The concurrency benchmark runs it apart from the client and the service so the three never
share a GIL: `python -m reasoning_service.bench.llm_server --port 8001 --delay 1.0`. Several
processes started with `--reuse-port` on one port share its connections, so the stand-in for
the LLM is not the bottleneck when hundreds of replies are due at the same moment.
"""

from __future__ import annotations

import argparse
import asyncio
import socket

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
    parser.add_argument(
        "--reuse-port",
        action="store_true",
        help="share the port with other processes started alike (the kernel spreads connections)",
    )
    args = parser.parse_args(argv)
    app = delayed_app(ScriptedAPI(responder=PolicyAgent()).app, args.delay)
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
        access_log=False,
        lifespan="off",
        backlog=4096,
    )
    sockets = [_shared_socket(args.port)] if args.reuse_port else None
    asyncio.run(uvicorn.Server(config).serve(sockets=sockets))


def _shared_socket(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(4096)
    return sock


if __name__ == "__main__":
    main()
