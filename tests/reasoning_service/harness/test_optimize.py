"""GEPA on a tiny dataset: a scripted model that does better under a better prompt, and a
scripted reflection model that proposes that prompt. The new version is written and selectable."""

from __future__ import annotations

import datetime as dt
import json

from reasoning_service.agent.react_controller import ReActController
from reasoning_service.harness.datasets import LabeledExample
from reasoning_service.harness.optimize import optimize_prompt
from reasoning_service.models import (
    CaseBundle,
    CriteriaSet,
    CriterionStatus,
    LLMReply,
    LLMRequest,
    Policy,
    SourceFormat,
)
from reasoning_service.prompts import Prompt, load_prompt
from reasoning_service.testing.scripted_llm import ScriptedLLM, finish
from reasoning_service.tools.tree_search import LexicalTreeSearch
from retrieval import RetrievalService, build_tree_from_markdown, walk
from testdata import EXAMPLES

MARKER = "Always cite the exact case line that shows the value."
GOLD = {
    "NCD-240.4/C1": (
        "The use of CPAP is covered under Medicare when used in adult patients with OSA.",
        {"doc_id": "consult-1", "page": 1, "quote": "Patient: 54-year-old female"},
    ),
    "NCD-240.4/C5": (
        "AHI or RDI greater than or equal to 15 events per hour, or",
        {"doc_id": "psg-1", "page": 2, "quote": "AHI: 18 events/hour"},
    ),
}


def policy() -> Policy:
    criteria = json.loads((EXAMPLES / "criteria" / "NCD-240.4.json").read_text())
    return Policy(
        policy_id="NCD-240.4",
        version="3",
        sha256="0" * 64,
        title="CPAP",
        source_format=SourceFormat.MARKDOWN,
        created_at=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
        tree=build_tree_from_markdown((EXAMPLES / "policies" / "NCD-240.4.md").read_text()),
        criteria=CriteriaSet.model_validate(criteria),
    )


def examples(case: CaseBundle) -> list[LabeledExample]:
    return [
        LabeledExample(
            example_id=f"cpap-dev-001/{cid}",
            case=case,
            policy_id="NCD-240.4",
            criterion_id=cid,
            gold_status=CriterionStatus.MET,
            gold_policy_quote=policy_quote,
            gold_case_quotes=[evidence["quote"]],
        )
        for cid, (policy_quote, evidence) in GOLD.items()
    ]


def agent_model(the_policy: Policy) -> ScriptedLLM:
    """Answers well only when the system prompt carries the marker sentence."""

    def answer(request: LLMRequest) -> LLMReply:
        criterion = json.loads(request.messages[1].content)["criterion"]["id"]
        if MARKER not in request.messages[0].content:
            return finish(status="not_met", confidence=0.9, rationale="Guess.")
        quote, evidence = GOLD[criterion]
        node = next(n.node_id for n in walk(the_policy.tree) if quote in n.text)
        return finish(
            status="met",
            confidence=0.95,
            rationale=f"The case shows {evidence['quote']}.",
            policy_citations=[{"node_id": node, "quote": quote}],
            case_evidence=[evidence],
        )

    return ScriptedLLM([answer] * 200)


def reflection_model() -> ScriptedLLM:
    def propose(request: LLMRequest) -> LLMReply:
        assert (
            "Status wrong" in request.messages[-1].content or "gold" in request.messages[-1].content
        )
        return LLMReply(content=f"```\nYou verify one criterion. {MARKER}\n```")

    return ScriptedLLM([propose] * 20)


async def test_gepa_writes_a_better_prompt_that_can_then_be_selected(tmp_path, cpap_case):
    the_policy = policy()
    retrieval = RetrievalService()
    await retrieval.index_policy(the_policy.policy_id, the_policy.tree)
    model = agent_model(the_policy)

    def controller_for(prompt: Prompt) -> ReActController:
        return ReActController(
            llm=model,
            prompt=prompt,
            retrieval=retrieval,
            tree_search=LexicalTreeSearch(retrieval),
            fallback=None,
        )

    data = examples(cpap_case)
    report = await optimize_prompt(
        base=Prompt("react-test-v1", "You verify one criterion."),
        controller_for=controller_for,
        reflection_llm=reflection_model(),
        policies={the_policy.policy_id: the_policy},
        trainset=data,
        valset=data,
        budget=12,
        prompts_dir=tmp_path,
        new_prompt_id="react-test-v2",
        minibatch_size=2,
    )
    await retrieval.aclose()

    assert report.improved and report.val_scores[report.best_index] > report.val_scores[0]
    assert report.candidate_log and report.parents[report.best_index] == [0]
    selected = load_prompt(tmp_path, "react-test-v2")
    assert MARKER in selected.system
    meta = json.loads((tmp_path / "react-test-v2.meta.json").read_text())
    assert (
        meta["parent_prompt_id"] == "react-test-v1" and meta["val_score"] > meta["base_val_score"]
    )
