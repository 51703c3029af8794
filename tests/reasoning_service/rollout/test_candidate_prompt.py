"""The candidate prompt of an A/B or shadow comes from the flags file and changes without a
restart; an unknown prompt id is refused (warning logged) and the last good candidate stays."""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

import pytest

from reasoning_service.errors import ConfigError
from reasoning_service.models import EvaluationRequest
from reasoning_service.rollout.flags import FlagSource, RolloutFlags
from reasoning_service.service.container import build_services
from reasoning_service.settings import Settings
from reasoning_service.testing.scripted_llm import ScriptedLLM, finish
from testdata import REPO

_MTIME = [1_700_000_000]


def write_flags(path: Path, flags: dict) -> None:
    """Write and move the mtime forward: two writes within one clock tick must still count."""
    path.write_text(json.dumps(flags))
    _MTIME[0] += 10
    os.utime(path, (_MTIME[0], _MTIME[0]))


def known_prompts(*known: str):
    def check(prompt_id: str) -> None:
        if prompt_id not in known:
            raise ConfigError(f"prompt {prompt_id!r} not found")

    return check


def test_the_flags_file_names_the_candidate_prompt(tmp_path):
    path = tmp_path / "flags.json"
    source = FlagSource(RolloutFlags("ab:50"), path, check_prompt=known_prompts("v2", "v3"))
    assert source.current().candidate_prompt_id is None
    write_flags(path, {"controller": "ab:50", "candidate_prompt_id": "v2"})
    assert source.current().candidate_prompt_id == "v2"
    write_flags(path, {"controller": "ab:50", "candidate_prompt_id": "v3"})
    assert source.current().candidate_prompt_id == "v3"


def test_an_unknown_prompt_is_refused_with_a_warning_and_the_old_one_kept(tmp_path, caplog):
    path = tmp_path / "flags.json"
    source = FlagSource(RolloutFlags("shadow"), path, check_prompt=known_prompts("v2"))
    write_flags(path, {"candidate_prompt_id": "v2"})
    assert source.current().candidate_prompt_id == "v2"
    with caplog.at_level(logging.WARNING, logger="reasoning_service.rollout.flags"):
        write_flags(path, {"controller": "ab:10", "candidate_prompt_id": "nope"})
        flags = source.current()
    assert flags.candidate_prompt_id == "v2" and flags.controller == "ab:10"
    assert any("candidate prompt rejected" in r.getMessage() for r in caplog.records)


def idle_model(request):
    """Whatever the prompt: an honest abstention (no citation needed)."""
    return finish(status="missing_info", confidence=0.9, rationale="Not shown.")


@pytest.fixture
def prompts_dir(tmp_path) -> Path:
    folder = tmp_path / "prompts"
    folder.mkdir()
    shutil.copy(REPO / "prompts" / "react-v1.md", folder / "react-v1.md")
    (folder / "react-v2.md").write_text("Version 2: verify the criterion, cite, then finish.\n")
    return folder


async def test_a_flags_change_between_two_evaluations_swaps_the_candidate_prompt(
    tmp_path, prompts_dir, cpap_case, caplog
):
    flags_path = tmp_path / "flags.json"
    write_flags(flags_path, {"controller": "ab:100"})
    settings = Settings(
        db_path=tmp_path / "db.sqlite",
        controller="heuristic",
        llm_provider="openai",
        prompts_dir=prompts_dir,
        flags_file=flags_path,
        tree_search="lexical",
        atom_questions=False,  # the candidate prompt is the loop's
    )
    llm = ScriptedLLM([idle_model] * 100)
    services = await build_services(settings, llm=llm)
    request = EvaluationRequest(
        case=cpap_case, policy_id="NCD-240.4", criterion_ids=["NCD-240.4/C5"]
    )
    try:
        # ab:100 without a candidate prompt: the candidate is react on the configured prompt.
        first = await services.evaluations.evaluate(request)
        assert (first.arm, first.results[0].prompt_id) == ("candidate", "react-v1")

        write_flags(flags_path, {"controller": "ab:100", "candidate_prompt_id": "react-v2"})
        second = await services.evaluations.evaluate(request)
        assert second.results[0].arm == "candidate"
        assert second.results[0].prompt_id == "react-v2" and second.prompt_id == "react-v2"
        assert llm.calls[-1].request.messages[0].content.startswith("Version 2")

        write_flags(flags_path, {"controller": "ab:0", "candidate_prompt_id": "react-v2"})
        control = await services.evaluations.evaluate(request)
        assert (control.results[0].arm, control.results[0].prompt_id) == ("control", "react-v1")

        with caplog.at_level(logging.WARNING, logger="reasoning_service.rollout.flags"):
            write_flags(flags_path, {"controller": "ab:100", "candidate_prompt_id": "react-v9"})
            kept = await services.evaluations.evaluate(request)
        assert kept.results[0].prompt_id == "react-v2"
        assert any("candidate prompt rejected" in r.getMessage() for r in caplog.records)
    finally:
        await services.aclose()
