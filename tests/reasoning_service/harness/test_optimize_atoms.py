"""GEPA on the atom-question prompt: a scripted model that reads better under a better prompt, a
scripted reflection model that proposes it, and a held-out part GEPA never sees that decides
whether the new version is written."""

from __future__ import annotations

import json
from pathlib import Path

from reasoning_service.harness.atom_questions import load_atom_questions
from reasoning_service.harness.optimize_atoms import optimize_atom_prompt, split_questions
from reasoning_service.models import LLMReply, LLMRequest
from reasoning_service.prompts import Prompt, load_prompt
from reasoning_service.service.container import build_atom_controller, build_services
from reasoning_service.settings import Settings
from reasoning_service.testing.scripted_llm import ScriptedLLM
from testdata import REPO

QUESTIONS = load_atom_questions(REPO / "eval" / "atom_questions.jsonl")
MARKER = "Read each snippet for who it is about before you answer."
GOLD = {tuple(s["text"] for s in q.snippets): q.gold for q in QUESTIONS}


def reader(request: LLMRequest) -> LLMReply:
    """Knows every answer, but gives it only under a prompt carrying the marker."""
    shown = json.loads(request.messages[-1].content)
    ids = [s["id"] for s in shown["snippets"]][:3]
    gold = GOLD.get(tuple(s["text"] for s in shown["snippets"]), "unknown")
    if MARKER not in request.messages[0].content or "opposite" in shown["question"]:
        answer = {"evidence": [], "answer": "unknown", "confidence": 0.9}
    else:
        answer = {"evidence": ids if gold != "unknown" else [], "answer": gold, "confidence": 0.9}
    return LLMReply(content=json.dumps(answer))


def reflection(request: LLMRequest) -> LLMReply:
    assert "The correct answer is" in request.messages[-1].content  # GEPA sees our feedback
    return LLMReply(content=f"```\nYou check one question about a patient's record. {MARKER}\n```")


def test_the_split_is_fixed_and_keeps_the_held_out_part_apart():
    train, val, held_out = split_questions(QUESTIONS, holdout_every=3)
    assert len(train) + len(val) + len(held_out) == len(QUESTIONS)
    assert not {q.id for q in held_out} & {q.id for q in train + val}
    assert split_questions(QUESTIONS, holdout_every=3)[2] == held_out


async def test_a_better_prompt_on_held_out_questions_is_written_as_a_new_version(tmp_path: Path):
    services = await build_services(
        Settings(db_path=tmp_path / "db.sqlite", atom_answer_format="json_schema")
    )

    def route(request: LLMRequest) -> LLMReply:  # GEPA's reflection sends one user message
        return reflection(request) if request.messages[0].role == "user" else reader(request)

    services.llm = ScriptedLLM([route] * 400)
    try:
        report = await optimize_atom_prompt(
            base=Prompt("atoms-test-v1", "You check one question about a patient's record."),
            controller_for=lambda p: build_atom_controller(services, check_yes=True, prompt=p),
            services=services,
            reflection_llm=services.llm,
            questions=QUESTIONS,
            root=REPO,
            budget=40,
            prompts_dir=tmp_path,
            new_prompt_id="atoms-test-v2",
            log=lambda _: None,
        )
    finally:
        await services.aclose()

    before = report.held_out_before["stages"]["checked"]
    assert report.held_out_after is not None
    after = report.held_out_after["stages"]["checked"]
    assert after["accuracy"] > before["accuracy"] and after["wrong_yes"] <= before["wrong_yes"]
    assert report.adopted and report.val_scores[report.best_index] > report.val_scores[0]
    assert MARKER in load_prompt(tmp_path, "atoms-test-v2").system
    meta = json.loads((tmp_path / "atoms-test-v2.meta.json").read_text())
    assert meta["parent_prompt_id"] == "atoms-test-v1"
    assert not set(meta["held_out"]) & set(meta["train"] + meta["validation"])
