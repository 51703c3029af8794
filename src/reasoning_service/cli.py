"""`reasoning-service`: the same async core as the API, from the command line."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

from pydantic import ValidationError
from rich.console import Console

from reasoning_service.errors import ReasoningError
from reasoning_service.models import (
    CaseBundle,
    CriteriaSet,
    EvaluationRequest,
    PolicyUpload,
    SourceFormat,
)
from reasoning_service.render import render_evaluation
from reasoning_service.services.container import Services, build_services
from reasoning_service.settings import Settings
from retrieval.tree import walk

_DEMO_CASE = "cpap-example-001.json"
_DEMO_POLICY = "NCD-240.4"


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script."""
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    console = Console()
    try:
        settings = Settings()
        if args.command == "serve":
            return _serve(settings, args)
        return asyncio.run(_with_services(settings, lambda s: args.run(s, args, console)))
    except (ReasoningError, ValidationError, OSError) as exc:
        Console(stderr=True).print(f"[red]error:[/] {exc}")
        return 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="reasoning-service", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run the HTTP API")
    serve.add_argument("--host")
    serve.add_argument("--port", type=int)

    evaluate = commands.add_parser("evaluate", help="evaluate a case bundle against a policy")
    evaluate.add_argument("case", type=Path, help="case bundle JSON file")
    evaluate.add_argument("--policy", required=True, help="policy id")
    evaluate.add_argument("--policy-version")
    evaluate.add_argument("--criterion", action="append", dest="criteria", help="criterion id")
    evaluate.add_argument("--json", action="store_true", help="print the result as JSON")
    evaluate.set_defaults(run=_evaluate)

    index = commands.add_parser("index-policy", help="index and store a policy document")
    index.add_argument("file", type=Path, help=".md, .pdf or PageIndex .json")
    index.add_argument("--policy-id", help="defaults to the file name without extension")
    index.add_argument("--version", default="1")
    index.add_argument("--title")
    index.add_argument("--criteria", type=Path, help="criteria set JSON")
    index.set_defaults(run=_index_policy)

    demo = commands.add_parser("demo", help="evaluate the bundled example case (make run)")
    demo.set_defaults(run=_demo)
    return parser


async def _with_services(settings: Settings, action: Callable[[Services], Awaitable[int]]) -> int:
    services = await build_services(settings)
    try:
        return await action(services)
    finally:
        await services.aclose()


def _serve(settings: Settings, args: argparse.Namespace) -> int:
    import uvicorn

    from reasoning_service.api.app import create_app

    uvicorn.run(
        create_app(settings),
        host=args.host or settings.host,
        port=args.port or settings.port,
        log_level=settings.log_level.lower(),
    )
    return 0


async def _evaluate(services: Services, args: argparse.Namespace, console: Console) -> int:
    case = CaseBundle.model_validate_json(args.case.read_text(encoding="utf-8"))
    request = EvaluationRequest(
        case=case,
        policy_id=args.policy,
        policy_version=args.policy_version,
        criterion_ids=args.criteria,
    )
    result = await services.evaluations.evaluate(request)
    if args.json:
        print(result.model_dump_json(indent=2))
    else:
        render_evaluation(result, console)
    return 0


async def _index_policy(services: Services, args: argparse.Namespace, console: Console) -> int:
    suffix = args.file.suffix.lower()
    if suffix == ".pdf":
        import base64

        source_format, content = SourceFormat.PDF, base64.b64encode(args.file.read_bytes()).decode()
    elif suffix == ".json":
        source_format, content = SourceFormat.PAGEINDEX, json.loads(args.file.read_text())
    else:
        source_format, content = SourceFormat.MARKDOWN, args.file.read_text(encoding="utf-8")
    criteria = CriteriaSet.model_validate_json(args.criteria.read_text()) if args.criteria else None
    policy = await services.policies.ingest(
        PolicyUpload(
            policy_id=args.policy_id or (criteria.policy_id if criteria else args.file.stem),
            version=args.version,
            title=args.title,
            source_format=source_format,
            content=content,
            criteria=criteria,
        )
    )
    console.print(
        f"indexed {policy.policy_id} v{policy.version} sha256 {policy.sha256} "
        f"({sum(1 for _ in walk(policy.tree))} nodes, {policy.criteria_count} criteria)"
    )
    return 0



async def _demo(services: Services, args: argparse.Namespace, console: Console) -> int:
    case_path = services.settings.examples_dir / "cases" / _DEMO_CASE
    console.print(
        f"Evaluating {case_path} against {_DEMO_POLICY} (controller: "
        f"{services.router.mode}; set REASONING_CONTROLLER / REASONING_LLM_PROVIDER "
        "to switch)"
    )
    args.case, args.policy, args.policy_version, args.criteria, args.json = (
        case_path,
        _DEMO_POLICY,
        None,
        None,
        False,
    )
    return await _evaluate(services, args, console)
