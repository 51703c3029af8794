"""The scripted OpenAI API with the policy-aware agent, as its own process (`python -m …`).

The concurrency benchmark runs it apart from the client and the service so the three never
share a GIL: `python -m reasoning_service.bench.llm_server --port 8001 --delay 1.0`.
"""

from __future__ import annotations

import argparse

import uvicorn

from reasoning_service.bench.agent import PolicyAgent
from reasoning_service.testing.scripted_server import ScriptedAPI


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--delay", type=float, default=1.0, help="seconds before each answer")
    args = parser.parse_args(argv)
    api = ScriptedAPI(responder=PolicyAgent(), latency_s=args.delay)
    uvicorn.run(
        api.app,
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
        access_log=False,
        lifespan="off",
        backlog=4096,
    )


if __name__ == "__main__":
    main()
