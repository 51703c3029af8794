"""The atom path for the `local` provider, on the OpenAI wire: constrained JSON answers under a
schema that allows only the snippet ids shown, and a "yes" asked again in negated form."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import openai
import pytest

from reasoning_service.conditions import ConditionsController, Vocabulary
from reasoning_service.conditions.atom_questions import (
    AtomQuestionController,
    answer_schema,
    answer_schemas,
    check_answer_schemas,
)
from reasoning_service.errors import ConfigError
from reasoning_service.llm.local_server import PromptCacheLog
from reasoning_service.llm.openai import OpenAIClient
from reasoning_service.models import AtomState, CriterionStatus
from reasoning_service.prompts import load_prompt
from reasoning_service.settings import Settings
from reasoning_service.testing import ScriptedServer
from reasoning_service.testing.scripted_llm import text

from .conftest import make_case
from .test_atom_questions import PROMPT, task

HOLDS_CASE = "Assessment: ischemic cardiomyopathy. Echo today: LVEF 30%."


@pytest.fixture(scope="module")
def _running_server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as running:
        yield running


@pytest.fixture
def server(_running_server: ScriptedServer) -> ScriptedServer:
    _running_server.reset()
    return _running_server


@pytest.fixture
async def local_llm(server: ScriptedServer) -> AsyncIterator[OpenAIClient]:
    sdk = openai.AsyncOpenAI(api_key="local", base_url=server.base_url, max_retries=0)
    client = OpenAIClient(sdk, model="qwen-test", provider="local", max_tokens_field="max_tokens")
    yield client
    await client.aclose()


def make(
    llm, vocabulary: Vocabulary, *, check_yes: bool = True, ask_decided: bool = True
) -> AtomQuestionController:
    return AtomQuestionController(
        llm=llm,
        prompt=PROMPT,
        conditions=ConditionsController(vocabulary),
        fallback=None,
        ask_decided=ask_decided,
        answer_format="json_schema",
        check_yes=check_yes,
    )


def answer(word: str, evidence: list[str], confidence: float = 0.9):
    return text(json.dumps({"evidence": evidence, "answer": word, "confidence": confidence}))


async def test_the_answer_is_constrained_json_citing_only_the_ids_shown(
    server, local_llm, vocabulary
):
    server.push(answer("yes", ["S1"]), answer("no", []))
    result = await make(local_llm, vocabulary).evaluate(task(make_case(HOLDS_CASE)))

    server.assert_complete()
    first, negated = (r.body for r in server.requests)
    assert negated["response_format"] == first["response_format"]
    assert "tools" not in first and "tool_choice" not in first
    schema = first["response_format"]["schema"]
    assert first["response_format"]["type"] == "json_object"
    assert list(schema["properties"]) == ["evidence", "answer", "confidence"]  # ids first
    assert schema["properties"]["evidence"]["items"]["enum"] == ["S1"]
    assert first["max_tokens"] == 200
    asked = [json.loads(r.messages[-1]["content"]) for r in server.requests]
    assert asked[0]["question"] == "Does the patient have ischemic cardiomyopathy?"
    assert asked[1]["question"].startswith("Is there documentation of the opposite")
    assert asked[0]["snippets"] == asked[1]["snippets"]
    assert result.status is CriterionStatus.MET
    icm = next(atom for atom in result.atoms if atom.atom_id == "icm")
    assert icm.state is AtomState.HOLDS and icm.decided_by == "model"


async def test_the_negated_question_reuses_the_prompt_prefix(server, local_llm, vocabulary):
    server.push(answer("yes", ["S1"]), answer("no", []))
    result = await make(local_llm, vocabulary).evaluate(task(make_case(HOLDS_CASE)))

    # Same system prompt and snippets: only the question at the end is new.
    assert result.usage.llm_calls == 2
    assert result.usage.cached_input_tokens > 0.5 * (result.usage.input_tokens / 2)


@pytest.mark.parametrize(
    ("negated", "state", "status"),
    [
        (answer("yes", ["S1"]), AtomState.CONFLICTING, CriterionStatus.UNCERTAIN),
        (text("no idea"), AtomState.CONFLICTING, CriterionStatus.UNCERTAIN),
        (answer("unknown", []), AtomState.HOLDS, CriterionStatus.MET),
    ],
    ids=["yes-both-ways", "unreadable", "unknown"],
)
async def test_a_yes_stands_only_when_the_negated_question_is_not_also_yes(
    negated, state, status, server, local_llm, vocabulary
):
    server.push(answer("yes", ["S1"]), negated)
    result = await make(local_llm, vocabulary).evaluate(task(make_case(HOLDS_CASE)))

    icm = next(atom for atom in result.atoms if atom.atom_id == "icm")
    assert (icm.state, result.status) == (state, status)
    if state is AtomState.CONFLICTING:
        assert "after the negated question" in icm.note


async def test_only_a_yes_that_would_hold_is_checked(server, local_llm, vocabulary):
    # A "yes" citing only a relative's mention is no answer: no second question.
    server.push(answer("yes", ["S1"]))
    case = make_case("Father had ischemic cardiomyopathy. Echo today: LVEF 30%.")
    result = await make(local_llm, vocabulary).evaluate(task(case))

    server.assert_complete()
    assert result.atoms[0].state is AtomState.NO_EVIDENCE
    assert result.atoms[0].decided_by == "code"
    assert result.status is CriterionStatus.MISSING_INFO


async def test_without_the_check_one_yes_is_enough(server, local_llm, vocabulary):
    server.push(answer("yes", ["S1"]))
    result = await make(local_llm, vocabulary, check_yes=False).evaluate(
        task(make_case(HOLDS_CASE))
    )
    server.assert_complete()
    assert result.status is CriterionStatus.MET


async def test_a_yes_that_the_budget_leaves_unchecked_does_not_hold(server, local_llm, vocabulary):
    server.push(answer("yes", ["S1"]))
    controller = AtomQuestionController(
        llm=local_llm,
        prompt=PROMPT,
        conditions=ConditionsController(vocabulary),
        fallback=None,
        token_budget=10,
        answer_format="json_schema",
        check_yes=True,
    )
    result = await controller.evaluate(task(make_case(HOLDS_CASE)))

    server.assert_complete()  # no negated question
    assert result.atoms[0].state is AtomState.CONFLICTING
    assert result.status is CriterionStatus.UNCERTAIN


def test_a_schema_exists_for_every_id_set_the_snippets_can_show():
    schemas = answer_schemas()
    assert (
        ("S1",) in schemas
        and ("F1",) in schemas
        and ("S1", "S2", "S3", "S4", "F1", "F2") in schemas
    )
    assert all(len(ids) <= 6 for ids in schemas)
    assert check_answer_schemas() == len(schemas) == 27
    assert answer_schema(["S1", "F1"])["properties"]["evidence"]["maxItems"] == 3


def test_a_schema_that_does_not_compile_stops_the_start_up():
    def refuse(schemas):
        raise ConfigError("grammar failed")

    with pytest.raises(ConfigError, match="grammar failed"):
        check_answer_schemas(refuse)


def test_the_local_provider_answers_constrained_and_checks_every_yes():
    local = Settings(llm_provider="local", llm_base_url="http://127.0.0.1:1/v1")
    hosted = Settings(llm_provider="openai")
    assert (local.effective_atom_answer_format, local.effective_atom_check_yes) == (
        "json_schema",
        True,
    )
    assert (hosted.effective_atom_answer_format, hosted.effective_atom_check_yes) == ("tool", False)
    assert (local.effective_atom_ask_decided, hosted.effective_atom_ask_decided) == (False, True)
    assert local.effective_atom_model_kinds == {"finding", "category"}
    assert len(hosted.effective_atom_model_kinds) == 4
    chosen = Settings(llm_provider="local", atom_model_kinds=["finding"])
    assert chosen.effective_atom_model_kinds == {"finding"}
    assert local.effective_atom_prompt_id == "atoms-local-v1"
    assert hosted.effective_atom_prompt_id == "atoms-v1"


def test_the_local_atom_prompt_is_short_and_fixed():
    prompt = load_prompt(Settings().prompts_dir, "atoms-local-v1")
    assert len(prompt.system) / 4 < 600  # tokens, at ~4 characters each (measured: see docs)
    assert "{" not in prompt.system  # nothing is filled in: the prefix is the same every call


def test_the_prompt_cache_log_gives_reused_tokens_per_request(tmp_path: Path):
    log = tmp_path / "server.log"
    log.write_text('INFO: "GET /v1/models HTTP/1.1" 200 OK\n')
    cache = PromptCacheLog(log)
    done = 'INFO:     127.0.0.1:5 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
    with log.open("a") as out:
        out.write("llama_perf_context_print: prompt eval time = 1 ms / 242 tokens\n" + done)
        out.write("Llama.generate: 230 prefix-match hit, remaining 20 prompt tokens to eval\n")
        out.write(done)
        out.write("Llama.generate: full prompt already cached, skipping reset\n" + done)
        out.write("Llama.generate: 12 prefix-match hit, remaining")  # still running
    assert cache.reused() == [0, 230, -1]
    assert cache.reused() == []


def test_start_up_converts_every_answer_schema_to_a_grammar_when_the_runtime_is_here():
    from reasoning_service.llm.local_server import is_runtime_installed
    from reasoning_service.service.container import check_atom_schemas

    if not is_runtime_installed():
        pytest.skip("llama.cpp runtime not installed (make setup-local)")
    local = Settings(llm_provider="local", llm_base_url="http://127.0.0.1:1/v1")
    assert check_atom_schemas(local) == 27  # in a child interpreter, ~1 s


async def test_without_ask_decided_only_what_code_left_open_is_asked(server, local_llm, vocabulary):
    # Code reads the cardiomyopathy (holds) and finds no LVEF: only the LVEF is asked.
    server.push(text(json.dumps({"evidence": [], "answer": "unknown", "confidence": 0.9})))
    case = make_case("Assessment: ischemic cardiomyopathy. LVEF to be measured at the echo.")
    result = await make(local_llm, vocabulary, ask_decided=False).evaluate(task(case))

    server.assert_complete()
    asked = [json.loads(r.messages[-1]["content"])["question"] for r in server.requests]
    assert len(asked) == 1 and "LVEF" in asked[0]
    icm = next(atom for atom in result.atoms if atom.atom_id == "icm")
    assert icm.state is AtomState.HOLDS and icm.decided_by == "code"
    assert result.status is CriterionStatus.MISSING_INFO
