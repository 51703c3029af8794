"""The hand-labeled atom question set and `eval atoms`' scoring, with a scripted model."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from reasoning_service.conditions.atom_questions import AtomQuestionController
from reasoning_service.harness.atom_questions import (
    QuestionOutcome,
    load_atom_questions,
    run_atom_questions,
    summarise,
)
from reasoning_service.models import LLMReply, LLMRequest
from reasoning_service.prompts import load_prompt
from reasoning_service.service.container import build_services
from reasoning_service.settings import Settings
from reasoning_service.testing.scripted_llm import ScriptedLLM
from testdata import REPO

QUESTIONS = REPO / "eval" / "atom_questions.jsonl"


def test_the_set_is_labeled_from_the_tuning_split_only_and_covers_every_policy():
    questions = load_atom_questions(QUESTIONS)
    assert len(questions) >= 60 and len({q.id for q in questions}) == len(questions)
    assert all(q.case.startswith("examples/eval/cases/tuning/") for q in questions)
    assert all("holdout" not in q.case for q in questions)
    gold = Counter(q.gold for q in questions)
    assert min(gold["yes"], gold["no"], gold["unknown"]) >= 10
    assert len({q.policy_id for q in questions}) == 5


def always_yes(request: LLMRequest) -> LLMReply:
    """A model that says "yes" to every question, citing the first snippet."""
    shown = json.loads(request.messages[-1].content)["snippets"]
    answer = {"evidence": [shown[0]["id"]], "answer": "yes", "confidence": 0.9}
    return LLMReply(content=json.dumps(answer))


async def test_an_always_yes_model_gets_no_wrong_yes_past_the_checks(tmp_path: Path):
    settings = Settings(db_path=tmp_path / "db.sqlite")
    services = await build_services(settings)
    try:
        questions = load_atom_questions(QUESTIONS)
        llm = ScriptedLLM([always_yes] * (2 * len(questions)))
        controller = AtomQuestionController(
            llm=llm,
            prompt=load_prompt(settings.prompts_dir, "atoms-local-v1"),
            conditions=services.conditions,
            fallback=None,
            answer_format="json_schema",
            check_yes=True,
        )
        outcomes = await run_atom_questions(
            questions, services, controller, root=REPO, log=lambda _: None
        )
    finally:
        await services.aclose()

    summary = summarise(outcomes)
    assert summary["stale"] == 0  # the labels were made on exactly these snippets
    assert summary["parsed"] == summary["ids_valid"] == 1.0
    stages = summary["stages"]
    not_yes = summary["gold"]["no"] + summary["gold"]["unknown"]
    assert stages["raw"]["wrong_yes"] == not_yes
    assert stages["verified"]["wrong_yes"] < not_yes  # negated, family, plans: code says no
    assert stages["checked"]["wrong_yes"] == 0  # "yes" both ways is never a "yes"
    assert stages["merged"]["wrong_yes"] == 0


def outcome(gold: str, raw: str, verified: str, checked: str, seconds: float) -> QuestionOutcome:
    return QuestionOutcome(
        id=f"q{seconds}", gold=gold, raw=raw, verified=verified, checked=checked,
        code="unknown", merged=checked, parsed=True,
        ids_valid=True, stale=False, seconds=seconds, calls=2, prompt_tokens=300,
        cached_tokens=200, output_tokens=20,
    )  # fmt: skip


def test_summary_scores_every_stage_and_the_cache_share():
    outcomes = [
        outcome("yes", "yes", "yes", "yes", 1.0),
        outcome("no", "yes", "yes", "unknown", 2.0),
        outcome("unknown", "yes", "unknown", "unknown", 3.0),
        outcome("no", "no", "no", "no", 4.0),
    ]
    summary = summarise(outcomes)
    assert summary["stages"]["raw"] == pytest.approx(
        {"accuracy": 0.5, "wrong_yes": 2, "wrong_yes_rate": 0.667, "yes_recall": 1.0,
         "no_recall": 0.5}
    )  # fmt: skip
    assert summary["stages"]["checked"]["wrong_yes"] == 0
    assert summary["stages"]["checked"]["accuracy"] == 0.75  # a "no" left at unknown: safe
    assert summary["seconds_per_question"]["p50"] == 2.5
    assert summary["cache_share"] == pytest.approx(0.667, abs=0.001)
    assert summary["prompt_tokens_per_call"] == 150
