"""`reasoning-service`: the same async core as the API, from the command line."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime as dt
import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

from pydantic import ValidationError
from rich.console import Console

from reasoning_service.api.app import create_app
from reasoning_service.bench import PROFILES, run_bench
from reasoning_service.cli.criteria import add_criteria_commands, run_criteria
from reasoning_service.cli.render import render_evaluation
from reasoning_service.errors import (
    ConfigError,
    InvalidInputError,
    NotFoundError,
    ReasoningError,
)
from reasoning_service.fhir import FhirLimits, case_from_fhir, is_fhir_bundle
from reasoning_service.harness.commands import add_eval_commands
from reasoning_service.llm.local_server import find_model, is_runtime_installed
from reasoning_service.logging_setup import configure_logging
from reasoning_service.models import (
    CaseBundle,
    CriteriaSet,
    EvaluationRequest,
    PolicyUpload,
    SourceFormat,
)
from reasoning_service.service.container import Services, build_services
from reasoning_service.service.examples import load_example_cases
from reasoning_service.service.jobs import WorkerTiming
from reasoning_service.settings import Settings
from reasoning_service.store.comparisons import shadow_report
from reasoning_service.store.keys import (
    create_api_key,
    list_api_keys,
    revoke_api_key,
    rotate_api_key,
)
from retrieval.tree import walk


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script."""
    args = _parser().parse_args(argv)
    # One handler, JSON through the allow-list (no basicConfig: it would write every line twice).
    configure_logging("WARNING")
    # Pipes (make run, CI logs) default to 80 columns, too narrow for the citation table.
    console = Console() if sys.stdout.isatty() else Console(width=160)
    try:
        settings = Settings()
        if args.command == "serve":
            return _serve(settings, args)
        if args.command == "bench":
            return _bench(args)
        if args.command == "criteria":
            return asyncio.run(run_criteria(settings, args))
        if args.command == "demo":
            settings = _demo_settings(settings)
        if args.command == "worker":
            configure_logging(settings.log_level, log_format=settings.log_format)
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
    evaluate.add_argument(
        "case", type=Path, help="case bundle JSON file, or a FHIR R4 Bundle (docs/fhir.md)"
    )
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

    add_eval_commands(commands)
    add_criteria_commands(commands)

    trace = commands.add_parser("trace", help="print the reasoning trace of a stored evaluation")
    trace.add_argument("evaluation_id")
    trace.set_defaults(run=_trace)

    worker = commands.add_parser(
        "worker", help="run queued asynchronous evaluations (needs REASONING_DATABASE_URL)"
    )
    worker.add_argument("--concurrency", type=int, help="default: REASONING_WORKER_CONCURRENCY")
    worker.add_argument("--name", help="the worker's name in logs")
    worker.set_defaults(run=_worker)

    demo = commands.add_parser("demo", help="evaluate the bundled example case (make run)")
    demo.add_argument(
        "--case",
        type=Path,
        dest="demo_case",
        help="another case bundle or FHIR Bundle (make run CASE=examples/fhir/…)",
    )
    demo.add_argument(
        "--policy", dest="demo_policy", help="its policy (default: from the manifest)"
    )
    demo.set_defaults(run=_demo)

    api_key = commands.add_parser("api-key", help="manage API keys")
    key_commands = api_key.add_subparsers(dest="key_command", required=True)
    create_key = key_commands.add_parser("create", help="create a key and print it once")
    create_key.add_argument("--admin", action="store_true", help="may read every evaluation")
    create_key.add_argument("--label", help="a note to tell keys apart (not secret)")
    create_key.add_argument(
        "--expires-in-days", type=float, help="the key stops working after this many days"
    )
    create_key.set_defaults(run=_create_api_key)
    list_keys = key_commands.add_parser("list", help="list keys (ids and dates, never secrets)")
    list_keys.add_argument("--json", action="store_true", help="print the keys as JSON")
    list_keys.set_defaults(run=_list_api_keys)
    revoke_key = key_commands.add_parser("revoke", help="revoke a key now")
    revoke_key.add_argument("key_id")
    revoke_key.set_defaults(run=_revoke_api_key)
    rotate_key = key_commands.add_parser(
        "rotate", help="give a key a new secret, print it once; the old one stops working"
    )
    rotate_key.add_argument("key_id")
    rotate_key.set_defaults(run=_rotate_api_key)

    report = commands.add_parser("shadow-report", help="agreement of shadow runs")
    report.add_argument("--window-hours", type=float, default=24.0)
    report.add_argument("--json", action="store_true", help="print the report as JSON")
    report.set_defaults(run=_shadow_report)

    bench = commands.add_parser("bench", help="run the benchmarks (eval/bench/README.md)")
    bench.add_argument("--quick", action="store_true", help="the short run (under 5 minutes)")
    bench.add_argument("--smoke", action="store_true", help="the smallest run (tests)")
    bench.add_argument("--out", type=Path, default=Path("bench-out"), help="output folder")
    bench.add_argument("--data", type=Path, help="data folder (default: shared/data or examples/)")
    return parser


async def _with_services(settings: Settings, action: Callable[[Services], Awaitable[int]]) -> int:
    services = await build_services(settings)
    try:
        return await action(services)
    finally:
        await services.aclose()


def _bench(args: argparse.Namespace) -> int:

    profile = "smoke" if args.smoke else "quick" if args.quick else "full"
    asyncio.run(run_bench(PROFILES[profile], out_dir=args.out, data_dir=args.data))
    return 0


def _serve(settings: Settings, args: argparse.Namespace) -> int:
    import uvicorn

    configure_logging(settings.log_level, log_format=settings.log_format)
    uvicorn.run(
        create_app(settings),
        host=args.host or settings.host,
        port=args.port or settings.port,
        log_level=settings.log_level.lower(),
        log_config=None,  # keep the JSON handler configured above
        access_log=False,  # RequestIdMiddleware logs one line per request
    )
    return 0


async def _evaluate(services: Services, args: argparse.Namespace, console: Console) -> int:
    case = _read_case(args.case, services.settings)
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


def _read_case(path: Path, settings: Settings) -> CaseBundle:
    """A case bundle file, or a FHIR R4 Bundle file mapped to one (fhir/inbound.py)."""
    text = path.read_text(encoding="utf-8")
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(f"{path.name}: not valid JSON ({exc.msg})") from None
    if not is_fhir_bundle(raw):
        return CaseBundle.model_validate(raw)
    limits = FhirLimits(
        max_attachment_bytes=settings.max_attachment_bytes,
        max_pdf_pages=settings.max_pages_per_document,
    )
    return case_from_fhir(raw, limits=limits)


def _demo_case(settings: Settings, args: argparse.Namespace) -> tuple[Path, str, list[str]]:
    """The case file, its policy and the demo criteria: the manifest's first, or `--case`."""
    cases = load_example_cases(settings.examples_dir)
    if args.demo_case is None:
        return (
            settings.examples_dir / "cases" / cases[0].file,
            cases[0].policy_id,
            list(cases[0].demo_criteria),
        )
    policy = args.demo_policy
    if policy is None:
        listed = {c.file: c.policy_id for c in cases}
        fhir_manifest = settings.examples_dir / "fhir" / "manifest.json"
        if fhir_manifest.exists():
            bundles = json.loads(fhir_manifest.read_text(encoding="utf-8"))["bundles"]
            listed |= {b["file"]: b["policy_id"] for b in bundles}
        policy = listed.get(args.demo_case.name)
    if policy is None:
        raise InvalidInputError(f"{args.demo_case.name}: not in a manifest; name it with --policy")
    return args.demo_case, policy, []


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
    ingested = await services.policies.ingest(
        PolicyUpload(
            policy_id=args.policy_id or (criteria.policy_id if criteria else args.file.stem),
            version=args.version,
            title=args.title,
            source_format=source_format,
            content=content,
            criteria=criteria,
        )
    )
    policy = ingested.policy
    verb = "indexed" if ingested.created else "already stored:"
    console.print(
        f"{verb} {policy.policy_id} v{policy.version} sha256 {policy.sha256} "
        f"({sum(1 for _ in walk(policy.tree))} nodes, {policy.criteria_count} criteria)"
    )
    return 0


def _demo_settings(settings: Settings) -> Settings:
    """The local model's ReAct loop when it is installed and no provider is set; else as is."""

    if settings.llm_provider is not None:
        return settings
    if not is_runtime_installed() or find_model(settings.models_dir, settings.local_model) is None:
        return settings
    return settings.model_copy(
        update={"llm_provider": "local", "controller": "react", "tree_search": "lexical"}
    )


async def _worker(services: Services, args: argparse.Namespace, console: Console) -> int:
    """Take jobs from the queue until SIGINT or SIGTERM (service/jobs.py)."""
    if services.jobs is None:
        raise ConfigError(
            "worker: asynchronous evaluations need REASONING_DATABASE_URL=postgresql://…"
        )
    settings = services.settings
    await services.jobs.run_worker(
        services.evaluations,
        concurrency=args.concurrency or settings.worker_concurrency,
        timing=WorkerTiming(
            heartbeat_s=settings.worker_heartbeat_s,
            stalled_after_s=settings.worker_stalled_after_s,
            recover_every_s=settings.worker_heartbeat_s,
        ),
        name=args.name,
    )
    return 0


async def _demo(services: Services, args: argparse.Namespace, console: Console) -> int:
    settings = services.settings
    case_path, policy_id, demo_criteria = _demo_case(settings, args)
    local = settings.llm_provider == "local"
    if local:
        how = (
            f"the ReAct loop on the local model {settings.local_model} (llama.cpp, offline); "
            f"two criteria, to keep a small CPU model's run short. "
            "REASONING_LLM_PROVIDER=openai|anthropic uses a hosted model"
        )
    elif services.router.mode == "heuristic":
        how = (
            "the heuristic controller (no LLM). `make setup-local` installs a local model "
            "that `make run` then uses; REASONING_LLM_PROVIDER=openai|anthropic with "
            "REASONING_CONTROLLER=react uses a hosted one"
        )
    else:
        how = f"controller {services.router.mode} with {settings.llm_provider}"
    console.print(f"Evaluating {case_path.name} against {policy_id} with {how}.")
    args.case, args.policy, args.policy_version, args.json = case_path, policy_id, None, False
    args.criteria = demo_criteria if local and demo_criteria else None
    code = await _evaluate(services, args, console)
    console.print(
        f"Stored in {settings.db_path}. Reasoning trace: "
        "`reasoning-service trace <evaluation id>` (or GET /v1/evaluations/<id>/trace)."
    )
    return code


async def _trace(services: Services, args: argparse.Namespace, console: Console) -> int:
    stored = await services.store.get_evaluation(args.evaluation_id)
    if stored is None:
        raise NotFoundError(f"evaluation {args.evaluation_id!r} is not known")
    traces = await services.store.get_traces(args.evaluation_id)
    for result in stored.result.results:
        console.rule(f"{result.criterion_id}: {result.status.value} ({result.controller})")
        for step in result.reasoning_trace:
            tool = f" {step.tool}" if step.tool else ""
            arguments = f" {json.dumps(step.arguments)}" if step.arguments else ""
            console.print(f"[{step.index}] {step.kind.value}{tool}{arguments} {step.content}"[:400])
        trace = traces.get(result.criterion_id)
        if trace is not None and trace.interactions:
            calls = trace.interactions
            console.print(
                f"{len(calls)} LLM calls, {sum(c.duration_ms for c in calls) / 1000:.1f} s, "
                f"{sum(1 for c in calls if not c.success)} failed"
            )
    return 0


async def _create_api_key(services: Services, args: argparse.Namespace, console: Console) -> int:

    if args.expires_in_days is not None and args.expires_in_days <= 0:
        raise InvalidInputError("--expires-in-days: must be more than 0")
    key, plaintext = await create_api_key(
        services.store,
        admin=args.admin,
        label=args.label,
        expires_in_days=args.expires_in_days,
    )
    kind = "admin key" if key.admin else "key"
    expiry = f", expires {key.expires_at:%Y-%m-%d %H:%M} UTC" if key.expires_at else ""
    Console(stderr=True).print(
        f"created {kind} {key.key_id}{expiry}; it is shown once and only its hash is stored:"
    )
    print(plaintext)
    return 0


async def _list_api_keys(services: Services, args: argparse.Namespace, console: Console) -> int:
    now = dt.datetime.now(dt.UTC)
    keys = await list_api_keys(services.store)
    if args.json:
        rows = [{**dataclasses.asdict(k), "live": k.is_live(now)} for k in keys]
        print(json.dumps(rows, default=str, indent=2))
        return 0
    for key in keys:
        state = "live" if key.is_live(now) else "revoked" if key.revoked_at else "expired"
        expiry = f" expires {key.expires_at:%Y-%m-%d}" if key.expires_at else ""
        kind = " admin" if key.admin else ""
        console.print(f"{key.key_id}{kind} {state}{expiry} {key.label or ''}".rstrip())
    return 0


async def _revoke_api_key(services: Services, args: argparse.Namespace, console: Console) -> int:
    key = await revoke_api_key(services.store, args.key_id)
    console.print(f"revoked {key.key_id}; its next request is refused")
    return 0


async def _rotate_api_key(services: Services, args: argparse.Namespace, console: Console) -> int:
    key, plaintext = await rotate_api_key(services.store, args.key_id)
    Console(stderr=True).print(
        f"rotated {key.key_id}: the old key no longer works; the new one is shown once:"
    )
    print(plaintext)
    return 0


async def _shadow_report(services: Services, args: argparse.Namespace, console: Console) -> int:

    report = await shadow_report(
        services.store,
        window_hours=args.window_hours,
    )
    if args.json:
        print(report.model_dump_json(indent=2))
        return 0
    rate = report.overall.agreement_rate
    console.print(
        f"Shadow agreement {report.since:%Y-%m-%d %H:%M} – {report.until:%Y-%m-%d %H:%M} UTC: "
        f"{report.overall.agreements}/{report.overall.comparisons}"
        + (f" ({rate:.1%})" if rate is not None else "")
        + f"; candidate errors {report.candidate_errors}, control errors {report.control_errors}"
    )
    for criterion_id, count in report.per_criterion.items():
        share = f"{count.agreement_rate:.1%}" if count.agreement_rate is not None else "-"
        console.print(f"  {criterion_id}: {count.agreements}/{count.comparisons} ({share})")
    for pair, n in report.per_status_pair.items():
        console.print(f"  {pair}: {n}")
    return 0
