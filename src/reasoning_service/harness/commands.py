"""`reasoning-service eval run | compare | optimize`: the harness from the command line.

Runs go through the same controllers the API serves (built by the service container); labeled
data and the policies it names can live anywhere (`--dataset`, `--trialgpt`, `--data`).
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import asdict
from pathlib import Path

from pydantic import SecretStr
from rich.console import Console

from reasoning_service.errors import InvalidInputError, NotFoundError
from reasoning_service.harness.datasets import (
    InvalidExample,
    LabeledExample,
    load_data_dir,
    load_trialgpt,
    read_labeled_examples,
    to_policy,
)
from reasoning_service.harness.report import compare_runs, render_comparison
from reasoning_service.harness.runner import run_eval
from reasoning_service.llm.base import LLMClient
from reasoning_service.llm.factory import build_llm_client
from reasoning_service.llm.recording import record_to_current_task
from reasoning_service.models import CaseBundle, CriterionResult, Policy
from reasoning_service.models.task import CriterionTask
from reasoning_service.service.container import Services, build_controller
from reasoning_service.testing.live_server import LiveServer
from reasoning_service.testing.scripted_agent import PolicyAgent
from reasoning_service.testing.scripted_server import ScriptedAPI


def add_eval_commands(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register `eval run`, `eval compare` and `eval optimize`."""
    parser = commands.add_parser("eval", help="evaluate on labeled data, compare, optimise")
    sub = parser.add_subparsers(dest="eval_command", required=True)

    run = sub.add_parser("run", help="run a controller over labeled examples")
    _add_data_arguments(run)
    run.add_argument("--controller", choices=["heuristic", "react"], default="heuristic")
    run.add_argument("--prompt", help="prompt id for the react controller")
    run.add_argument(
        "--llm",
        choices=["configured", "scripted"],
        default="configured",
        help="react's model: the configured provider, or the deterministic scripted agent "
        "served on 127.0.0.1 (offline runs of the whole LLM path)",
    )
    run.add_argument("--limit", type=int)
    run.add_argument("--concurrency", type=int, default=4)
    run.add_argument("--out", type=Path, required=True, help="run folder (resumable)")
    run.add_argument(
        "--strict",
        action="store_true",
        help="stop at the first invalid example (bad line, case, unknown policy) instead of "
        "recording it as an error row and going on",
    )
    run.set_defaults(run=_run)

    compare = sub.add_parser("compare", help="difference of two runs, with per-example flips")
    compare.add_argument("run_a", type=Path)
    compare.add_argument("run_b", type=Path)
    compare.set_defaults(run=_compare)

    optimize = sub.add_parser("optimize", help="evolve the react prompt with GEPA")
    _add_data_arguments(optimize)
    optimize.add_argument("--budget", type=int, required=True, help="metric calls GEPA may spend")
    optimize.add_argument("--prompt", help="base prompt id (default: the configured one)")
    optimize.add_argument("--new-prompt-id")
    optimize.add_argument("--limit", type=int)
    optimize.add_argument("--val-fraction", type=float, default=0.5)
    optimize.add_argument("--minibatch", type=int, default=3)
    optimize.add_argument("--seed", type=int, default=0)
    optimize.add_argument("--run-dir", type=Path, help="GEPA state, to resume a stopped run")
    optimize.set_defaults(run=_optimize)

    atoms = sub.add_parser(
        "atoms", help="the configured model over hand-labeled atom questions (docs/local-llm.md)"
    )
    atoms.add_argument("--questions", type=Path, default=Path("eval/atom_questions.jsonl"))
    atoms.add_argument("--limit", type=int, help="the first N questions")
    atoms.add_argument("--every", type=int, default=1, help="every k-th question (a subset)")
    atoms.add_argument("--deadline-s", type=float, help="stop asking after this much wall time")
    atoms.add_argument("--out", type=Path, help="write every answer and the summary as JSON")
    atoms.set_defaults(run=_atoms)

    optimize_atoms = sub.add_parser(
        "optimize-atoms",
        help="evolve the atom-question prompt with GEPA on the labeled atom questions",
    )
    optimize_atoms.add_argument("--questions", type=Path, default=Path("eval/atom_questions.jsonl"))
    optimize_atoms.add_argument(
        "--budget", type=int, required=True, help="questions GEPA may ask (metric calls)"
    )
    optimize_atoms.add_argument("--prompt", help="base prompt id (default: the configured one)")
    optimize_atoms.add_argument("--new-prompt-id")
    optimize_atoms.add_argument(
        "--holdout-every", type=int, default=3, help="every k-th question is held out from GEPA"
    )
    optimize_atoms.add_argument("--minibatch", type=int, default=3)
    optimize_atoms.add_argument("--seed", type=int, default=0)
    optimize_atoms.add_argument("--out", type=Path, help="write the report as JSON")
    optimize_atoms.set_defaults(run=_optimize_atoms)


def _add_data_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--dataset", type=Path, help="labeled examples (.jsonl)")
    source.add_argument("--trialgpt", type=Path, help="TrialGPT criterion annotations (.json)")
    parser.add_argument(
        "--data", type=Path, help="folder like shared/data: policies/manifest.json and criteria/"
    )


async def load_examples(
    services: Services, args: argparse.Namespace, *, strict: bool = True
) -> tuple[list[LabeledExample], dict[str, Policy], list[InvalidExample]]:
    """The examples, every policy they name (indexed for retrieval, in memory only) and the
    dataset lines that are not usable examples.

    With `strict`, a bad line or an unknown policy raises (nothing runs); without, bad lines come
    back as `InvalidExample`s and an unknown policy is left out, so the runner records an error
    row for each of its examples.
    """
    policies: dict[str, Policy] = {}
    invalid: list[InvalidExample] = []
    if args.trialgpt:
        examples, sources = load_trialgpt(args.trialgpt)
        policies.update({pid: to_policy(source) for pid, source in sources.items()})
    else:
        examples, invalid = read_labeled_examples(args.dataset, strict=strict)
    if args.data:
        loaded = [to_policy(source) for source in load_data_dir(args.data)]
        reviewed = [services.policies.with_reviewed_conditions(p) for p in loaded]
        policies.update({p.policy_id: p for p in reviewed})
    if args.limit:
        examples = examples[: args.limit]
    for policy_id in sorted({e.policy_id for e in examples} - policies.keys()):
        try:
            policies[policy_id] = await services.policies.get(policy_id)
        except NotFoundError:
            if strict:
                raise
    for policy_id in {e.policy_id for e in examples} & policies.keys():
        policy = policies[policy_id]
        await services.retrieval.index_policy(policy.policy_id, policy.tree)
    return examples, policies, invalid


async def _run(services: Services, args: argparse.Namespace, console: Console) -> int:
    if args.llm == "scripted" and args.controller == "react":
        with LiveServer(ScriptedAPI(responder=PolicyAgent()).app) as server:
            scripted = services.settings.model_copy(
                update={
                    "llm_provider": "openai",
                    "llm_model": "scripted-agent",
                    "llm_base_url": f"{server.url}/v1",
                    "llm_api_key": SecretStr("scripted"),
                }
            )
            llm = build_llm_client(scripted, sink=record_to_current_task)
            try:
                return await _run_with(services, args, console, llm)
            finally:
                if llm is not None:
                    await llm.aclose()
    return await _run_with(services, args, console, None)


async def _run_with(
    services: Services, args: argparse.Namespace, console: Console, llm: LLMClient | None
) -> int:
    examples, policies, invalid = await load_examples(services, args, strict=args.strict)
    controller = build_controller(services, args.controller, prompt_id=args.prompt, llm=llm)
    react_llm = (llm or services.llm) if args.controller == "react" else None
    model = react_llm.model if react_llm else None

    async def evaluate(case: CaseBundle, policy: Policy, criterion_id: str) -> CriterionResult:
        criterion = policy.criteria.criterion(criterion_id) if policy.criteria else None
        if criterion is None:
            raise InvalidInputError(f"{criterion_id} is not a criterion of {policy.policy_id}")
        return await controller.evaluate(
            CriterionTask(case=case, policy=policy, criterion=criterion)
        )

    summary = await run_eval(
        examples,
        policies,
        evaluate,
        out_dir=args.out,
        concurrency=args.concurrency,
        run_info={
            "controller": args.controller,
            "prompt_id": getattr(controller, "prompt_id", None),
            "model": model,
            "dataset": str(args.dataset or args.trialgpt),
        },
        invalid=invalid,
    )
    metrics = summary.metrics
    console.print(
        f"{metrics.n} examples ({summary.counts.resumed} resumed): "
        f"accuracy {metrics.status_accuracy:.3f}, macro-F1 {metrics.macro_f1:.3f}, "
        f"unsafe-met {metrics.unsafe_met} of {metrics.unsafe_met_denominator}, "
        f"citations {metrics.citation_accuracy:.3f}, ECE {metrics.ece:.3f}, "
        f"composite {metrics.composite:.3f}"
    )
    if summary.counts.invalid or summary.counts.errors:
        console.print(
            f"{summary.counts.invalid} invalid examples and {summary.counts.errors} evaluation "
            "errors recorded as error rows (see results.jsonl)"
        )
    console.print(f"Wrote {args.out}/results.jsonl, summary.json and report.html")
    return 0


async def _compare(services: Services, args: argparse.Namespace, console: Console) -> int:
    print(render_comparison(compare_runs(args.run_a, args.run_b)))
    return 0


async def _optimize(services: Services, args: argparse.Namespace, console: Console) -> int:
    from reasoning_service.harness.optimize import optimize_prompt
    from reasoning_service.prompts import load_prompt

    examples, policies, _ = await load_examples(services, args)
    train, val = split(examples, args.val_fraction, seed=args.seed)
    settings = services.settings
    base = load_prompt(settings.prompts_dir, args.prompt or settings.prompt_id)
    async with _reflection_llm(services) as reflection:
        if reflection is None:
            raise InvalidInputError(
                "eval optimize needs a model: set REASONING_LLM_* or REASONING_REFLECTION_*"
            )
        report = await optimize_prompt(
            base=base,
            controller_for=lambda prompt: build_controller(
                services, "react", prompt=prompt, fallback=False, loop_only=True
            ),
            reflection_llm=reflection,
            policies=policies,
            trainset=train,
            valset=val,
            budget=args.budget,
            prompts_dir=settings.prompts_dir,
            new_prompt_id=args.new_prompt_id,
            minibatch_size=args.minibatch,
            run_dir=args.run_dir,
            seed=args.seed,
        )
    for entry in report.candidate_log:
        console.print(f"  evaluation {entry['evaluation']}: mean score {entry['mean_score']:.3f}")
    scores = ", ".join(f"{s:.3f}" for s in report.val_scores)
    console.print(f"validation scores per candidate: {scores} (best #{report.best_index})")
    if report.path:
        console.print(f"New prompt {report.prompt_id} written to {report.path}")
        console.print(f"Select it with REASONING_PROMPT_ID={report.prompt_id}")
    else:
        console.print("No candidate beat the base prompt; nothing written.")
    return 0


async def _atoms(services: Services, args: argparse.Namespace, console: Console) -> int:
    from reasoning_service.harness.atom_questions import (
        load_atom_questions,
        outcomes_json,
        run_atom_questions,
        summarise,
    )
    from reasoning_service.llm.local_server import PromptCacheLog
    from reasoning_service.service.container import build_atom_controller

    questions = load_atom_questions(args.questions)[:: max(args.every, 1)][: args.limit]
    server = services.local_server
    cache_log = PromptCacheLog(server.log_path) if server and server.log_path else None
    outcomes = await run_atom_questions(
        questions,
        services,
        build_atom_controller(services, check_yes=True),
        root=Path.cwd(),
        cache_log=cache_log,
        deadline_s=args.deadline_s,
        log=console.print,
    )
    summary = {"model": services.llm.model if services.llm else None, **summarise(outcomes)}
    console.print_json(json.dumps(summary))
    if args.out:
        args.out.write_text(outcomes_json(outcomes, summary) + "\n", encoding="utf-8")
    return 0


async def _optimize_atoms(services: Services, args: argparse.Namespace, console: Console) -> int:
    from reasoning_service.harness.atom_questions import load_atom_questions
    from reasoning_service.harness.optimize_atoms import optimize_atom_prompt
    from reasoning_service.prompts import load_prompt
    from reasoning_service.service.container import build_atom_controller

    if services.llm is None:
        raise InvalidInputError("eval optimize-atoms needs a model: set REASONING_LLM_*")
    settings = services.settings
    base = load_prompt(settings.prompts_dir, args.prompt or settings.effective_atom_prompt_id)
    async with _reflection_llm(services) as reflection:
        report = await optimize_atom_prompt(
            base=base,
            controller_for=lambda p: build_atom_controller(services, check_yes=True, prompt=p),
            services=services,
            reflection_llm=reflection or services.llm,
            questions=load_atom_questions(args.questions),
            root=Path.cwd(),
            budget=args.budget,
            prompts_dir=settings.prompts_dir,
            new_prompt_id=args.new_prompt_id,
            holdout_every=args.holdout_every,
            minibatch_size=args.minibatch,
            seed=args.seed,
            log=console.print,
        )
    summary = {
        "model": services.llm.model,
        **{k: v for k, v in asdict(report).items() if k != "path"},
        "adopted": report.adopted,
        "path": str(report.path) if report.path else None,
    }
    console.print_json(json.dumps(summary, default=str))
    if args.out:
        args.out.write_text(json.dumps(summary, indent=2, default=str) + "\n", encoding="utf-8")
    if report.adopted:
        console.print(f"New prompt {report.prompt_id} written to {report.path}")
        console.print(f"Select it with REASONING_ATOM_PROMPT_ID={report.prompt_id}")
    else:
        console.print("Not better on the held-out questions: nothing written.")
    return 0


@asynccontextmanager
async def _reflection_llm(services: Services) -> AsyncIterator[LLMClient | None]:
    """The model GEPA reflects with: a separately configured one (`REASONING_REFLECTION_*`)
    gets a client of its own (plain text, so no tool-calling mode), closed at the end;
    otherwise the service's own LLM (None without one)."""
    settings = services.settings
    if not settings.reflection_provider:
        yield services.llm
        return
    own = build_llm_client(
        settings.reflection_settings().model_copy(update={"tool_calling_mode": "native"})
    )
    try:
        yield own
    finally:
        await own.aclose()


def split(
    examples: list[LabeledExample], val_fraction: float, *, seed: int
) -> tuple[list[LabeledExample], list[LabeledExample]]:
    """A seeded train/validation split; both halves are non-empty when there are 2+ examples."""
    shuffled = list(examples)
    random.Random(seed).shuffle(shuffled)
    cut = min(max(1, round(len(shuffled) * (1 - val_fraction))), max(len(shuffled) - 1, 1))
    return shuffled[:cut], shuffled[cut:] or shuffled[:cut]
