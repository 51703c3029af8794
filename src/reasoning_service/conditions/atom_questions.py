"""The LLM's part in deciding a criterion with conditions: narrow questions about single atoms.

Code decides what it can; the model only reads (DESIGN.md, "Criteria as checkable conditions").
For one criterion:
    1. every atom is evaluated by code (`evaluate_conditions`), exactly as the heuristic does;
       a quantity, time window or category that code decided (holds / fails) is final;
    2. each remaining atom of the kinds put to the model (`model_kinds`) — any atom code left
       at no evidence or conflicting, and with `ask_decided` every finding too (a second reading
       that can confirm code or make the atom conflicting) — that the case mentions at all
       becomes one question: the atom's `question`
       (or one built from its `label`) and at most `MAX_SNIPPETS` numbered snippets of the case
       (sentences that mention the atom's names: S1…, facts named for it: F1…);
    3. the model answers `{answer: yes|no|unknown, evidence: [ids], confidence}`: as one
       `answer` tool call (hosted models), or as JSON text constrained by `answer_schema`
       (`answer_format="json_schema"`, for llama.cpp: the grammar puts the evidence ids first
       and allows only the ids shown); ids resolve to verbatim case text with offsets and are
       verified;
    4. the answer becomes a state by code's reading of the cited snippets (`model_state`); with
       `check_yes`, a "yes" that would hold must survive the same atom asked in its negated form
       (`negated_question_for`): a second "yes" (or no readable answer) makes it conflicting;
       the state is merged with code's own verdict (`merge_states`);
    5. code combines all atoms (`conclude`); the model never declares the criterion's status.

Rules for an answer (`yes` means the atom holds, whatever its polarity):
    - unknown, no ids, an id that was not offered, a snippet that does not verify, or
      confidence below `abstain_below`                               -> no answer
    - yes: no answer when no cited snippet shows the atom's side (an affirmed mention; a negated
      one for `expect: absent`): a "yes" its own evidence does not show is a guess; holds when
      one does and none shows the other side, a relative, a hypothetical or only a possibility;
      otherwise conflicting
    - no: fails when a cited snippet shows the other side (for `expect: present`, a negated
      mention); otherwise no evidence
    - for a category, a snippet shows "yes" only where it names an allowed value, and "no"
      where it names only other values ("EF 55% on the transfer form" names no method)

`merge_states(code, model)`: no answer or no evidence from the model leaves code's verdict;
over code's "no evidence" the model's state stands; the model may confirm code or make it
conflicting, and may turn a conflict into `fails` (the safe direction), never into `holds`.

Errors: an `LLMError` after retries gives the fallback's result (`llm_fallback`), or
`uncertain` with the error's reason when there is no fallback — the loop's rules.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any, Literal

from jsonschema import Draft202012Validator, SchemaError
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from reasoning_service.conditions.atoms import (
    denied_by_its_sentence,
    fact_is_evidence,
    fact_presence,
)
from reasoning_service.conditions.case_reading import CaseReading, Mention
from reasoning_service.conditions.combine import combine
from reasoning_service.conditions.controller import (
    ConditionsController,
    cite_policy,
    conclude,
    evaluate_conditions,
)
from reasoning_service.errors import ConfigError, LLMError
from reasoning_service.llm.base import LLMClient
from reasoning_service.llm.recording import complete_recorded
from reasoning_service.models import (
    AtomResult,
    AtomState,
    CaseEvidence,
    CriterionResult,
    CriterionStatus,
    LLMReply,
    LLMRequest,
    Message,
    PolicyCitation,
    ReasonCode,
    ReasoningStep,
    StepKind,
    ToolSpec,
    Usage,
)
from reasoning_service.models.conditions import Atom, CategoryAtom, Conditions, FindingAtom
from reasoning_service.models.result import as_llm_fallback, llm_failure_reason
from reasoning_service.models.task import Controller, CriterionTask
from reasoning_service.prompts import Prompt
from reasoning_service.tools.citations import verify_case_evidence

__all__ = [
    "ANSWER",
    "AnswerFormat",
    "AtomAnswer",
    "AtomAsked",
    "AtomQuestionController",
    "Snippet",
    "answer_schema",
    "answer_schemas",
    "answer_spec",
    "check_answer_schemas",
    "merge_states",
    "model_state",
    "negated_question_for",
    "parse_answer",
    "question_for",
    "snippets_for",
]

AnswerFormat = Literal["tool", "json_schema"]
"""How the model answers: one forced `answer` tool call, or JSON text under `answer_schema`."""

ANSWER = "answer"
MAX_SNIPPETS = 6
MAX_FACT_SNIPPETS = 2
SNIPPET_CHARS = 300
MAX_CITED = 3
"""Ids a constrained answer may cite: the decisive one first."""
_ANSWER_DESCRIPTION = (
    "Answer the question: yes, no or unknown, the ids of the snippets that show it "
    "(S1, F2 …), and your confidence from 0 to 1."
)
_CODE_FINAL = {AtomState.HOLDS, AtomState.FAILS}
_JSON_OBJECT = re.compile(r"\{.*\}", re.S)


@dataclass(frozen=True, slots=True)
class Snippet:
    """One numbered piece of the case shown to the model, with what code reads in it."""

    id: str
    source: str
    """Where it is from: `note-1 p.2` or `fact labs.hba1c`."""
    text: str
    evidence: CaseEvidence
    """Verbatim case text (with offsets, for document sentences) the id resolves to."""
    affirms: bool = False
    """An affirmed mention about the patient, or a fact saying the concept is present."""
    negates: bool = False
    """A negated mention about the patient, or a fact saying the concept is absent."""
    doubtful: bool = False
    """A mention about a relative, hypothetical, or only possible."""


class AtomAnswer(BaseModel):
    """The arguments of the model's `answer` call; anything else it sends is ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    answer: Literal["yes", "no", "unknown"]
    evidence: list[str] = Field(default_factory=list, max_length=MAX_SNIPPETS * 2)
    confidence: float = Field(default=0.0, ge=0.0, le=1.0)


def answer_spec(description: str = _ANSWER_DESCRIPTION) -> ToolSpec:
    """The one tool the model may call."""
    return ToolSpec(
        name=ANSWER,
        description=description,
        parameters={
            "type": "object",
            "properties": {
                "answer": {"type": "string", "enum": ["yes", "no", "unknown"]},
                "evidence": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "Ids of the snippets that show the answer.",
                },
                "confidence": {"type": "number", "minimum": 0, "maximum": 1},
            },
            "required": ["answer", "evidence", "confidence"],
            "additionalProperties": False,
        },
    )


def answer_schema(ids: Sequence[str]) -> dict[str, Any]:
    """The JSON a constrained model must write for a question showing snippets `ids`.

    Property order is the order llama.cpp's grammar enforces: the evidence first (the model
    names the decisive snippet before it answers), then the answer, then a confidence. Only the
    ids shown can be cited, so every citation resolves. llama.cpp does not enforce a number's
    `minimum`/`maximum`; `AtomAnswer` does."""
    return {
        "type": "object",
        "properties": {
            "evidence": {
                "type": "array",
                "items": {"type": "string", "enum": list(ids)},
                "maxItems": MAX_CITED,
            },
            "answer": {"type": "string", "enum": ["yes", "no", "unknown"]},
            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        },
        "required": ["evidence", "answer", "confidence"],
        "additionalProperties": False,
    }


@cache
def answer_schemas() -> Mapping[tuple[str, ...], dict[str, Any]]:
    """The schema of every id set `snippets_for` can show (S1…Sn then F1…Fm, n + m ≤ 6)."""
    return {
        ids: answer_schema(ids)
        for n in range(MAX_SNIPPETS + 1)
        for m in range(MAX_SNIPPETS + 1 - n)
        if (ids := tuple(itertools.chain(_ids("S", n), _ids("F", m))))
    }


def _ids(prefix: str, count: int) -> list[str]:
    return [f"{prefix}{number}" for number in range(1, count + 1)]


def check_answer_schemas(
    compile_schemas: Callable[[list[dict[str, Any]]], None] | None = None,
) -> int:
    """Validate every answer schema, and compile them all (e.g. to llama.cpp grammars), once at
    start-up: llama.cpp silently falls back to unconstrained JSON when a schema does not
    compile. Returns how many were checked.

    Raises:
        ConfigError: a schema is invalid (`compile_schemas` raises its own `ConfigError`).
    """
    schemas = answer_schemas()
    for ids, schema in schemas.items():
        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as exc:
            raise ConfigError(f"answer schema for {list(ids)} is invalid: {exc.message}") from exc
    if compile_schemas is not None:
        compile_schemas(list(schemas.values()))
    return len(schemas)


def question_for(atom: Atom) -> str:
    """The atom's authored question, or one built from its label (yes = the atom holds)."""
    return atom.question or f"Does the case show this for the patient: {atom.label}?"


def negated_question_for(atom: Atom) -> str:
    """The same atom asked the other way round (yes = the record documents the opposite)."""
    return (
        "Is there documentation of the opposite for the patient (absent, denied, ruled out, "
        f"not done or not true): {atom.label}?"
    )


def snippets_for(atom: Atom, reading: CaseReading, min_fact_confidence: float) -> list[Snippet]:
    """Sentences mentioning the atom's names (S…) and facts named for it (F…), at most
    `MAX_SNIPPETS`, each at most `SNIPPET_CHARS` long and verbatim.

    A fact that is no evidence to code (below `min_fact_confidence`, or the request's own
    claim) is shown but shows neither side: a model citing it alone has only a guess."""
    names = reading.names(atom.concept, atom.aliases)
    by_sentence: dict[int, list[Mention]] = {}
    for mention in reading.mentions(names):
        by_sentence.setdefault(mention.sentence.index, []).append(mention)
    facts = reading.facts_named(names, atom.codes)
    sentence_slots = MAX_SNIPPETS - min(len(facts), MAX_FACT_SNIPPETS)
    snippets = [
        _sentence_snippet(f"S{number}", mentions)
        for number, mentions in enumerate(list(by_sentence.values())[:sentence_slots], start=1)
    ]
    for number, view in enumerate(facts[: MAX_SNIPPETS - len(snippets)], start=1):
        value = view.fact.value
        value_text = ", ".join(map(str, value)) if isinstance(value, list) else str(value)
        presence = (
            fact_presence(view, reading) if fact_is_evidence(view, min_fact_confidence) else None
        )
        snippets.append(
            Snippet(
                id=f"F{number}",
                source=f"fact {view.fact.field}",
                text=f"{view.fact.field}: {value_text}"[:SNIPPET_CHARS],
                evidence=view.evidence(),
                affirms=presence is True,
                negates=presence is False,
                doubtful=presence is True and denied_by_its_sentence(view, reading, names),
            )
        )
    if isinstance(atom, CategoryAtom):
        return _by_value(atom, snippets, reading)
    return snippets


def _by_value(atom: CategoryAtom, snippets: list[Snippet], reading: CaseReading) -> list[Snippet]:
    """For a category, a snippet shows "yes" only where it names an allowed value ("EF 55%"
    names no method), and "no" where it names only other values."""
    allowed = tuple(word for value in atom.allowed for word in atom.values[value])
    others = tuple(
        word for value, words in atom.values.items() if value not in atom.allowed for word in words
    )
    read: list[Snippet] = []
    for snippet in snippets:
        names_allowed = bool(reading.find_in(snippet.text, allowed))
        names_other = bool(reading.find_in(snippet.text, others))
        read.append(
            replace(
                snippet,
                affirms=snippet.affirms and names_allowed,
                negates=snippet.negates or (snippet.affirms and names_other and not names_allowed),
            )
        )
    return read


def _sentence_snippet(snippet_id: str, mentions: list[Mention]) -> Snippet:
    sentence = mentions[0].sentence
    start = 0
    if len(sentence.text) > SNIPPET_CHARS:
        start = min(max(mentions[0].start - SNIPPET_CHARS // 3, 0), len(sentence.text))
        start = max(min(start, len(sentence.text) - SNIPPET_CHARS), 0)
    quote = sentence.text[start : start + SNIPPET_CHARS]
    about = [m for m in mentions if m.stance.about_patient]
    return Snippet(
        id=snippet_id,
        source=f"{sentence.doc_id} p.{sentence.page}",
        text=quote,
        evidence=CaseEvidence(
            doc_id=sentence.doc_id,
            page=sentence.page,
            quote=quote,
            char_start=sentence.start + start,
            char_end=sentence.start + start + len(quote),
        ),
        affirms=any(m.stance.affirmed for m in about),
        negates=any(m.stance.negated for m in about),
        doubtful=any(
            not m.stance.about_patient or (m.stance.possible and not m.stance.negated)
            for m in mentions
        ),
    )


def parse_answer(reply: LLMReply | None) -> AtomAnswer | None:
    """The `answer` call's arguments, else a JSON object in the text; None when neither parses."""
    if reply is None:
        return None
    call = next((c for c in reply.tool_calls if c.name == ANSWER), None)
    raw = call.arguments_json if call is not None else None
    if raw is None:
        found = _JSON_OBJECT.search(reply.content or "")
        raw = found.group(0) if found else None
    if raw is None:
        return None
    try:
        return AtomAnswer.model_validate_json(raw)
    except ValidationError:
        return None


def model_state(
    atom: Atom, answer: AtomAnswer | None, cited: Sequence[Snippet], *, abstain_below: float
) -> AtomState | None:
    """What a verified answer says about the atom (module docstring); None for no answer.

    `cited` are the snippets the answer's ids resolved to and verified; the caller passes an
    empty list when any id was unknown or did not verify."""
    if answer is None or answer.answer == "unknown" or not cited:
        return None
    if answer.confidence < abstain_below:
        return None
    absent = isinstance(atom, FindingAtom) and atom.expect == "absent"

    def shows_yes(snippet: Snippet) -> bool:
        return snippet.negates if absent else snippet.affirms

    def shows_no(snippet: Snippet) -> bool:
        return snippet.affirms if absent else snippet.negates

    if answer.answer == "yes":
        if not any(map(shows_yes, cited)):
            return None  # its own evidence does not show it: a guess, not a reading
        clean = not any(shows_no(s) or s.doubtful for s in cited)
        return AtomState.HOLDS if clean else AtomState.CONFLICTING
    return AtomState.FAILS if any(map(shows_no, cited)) else AtomState.NO_EVIDENCE


def merge_states(code: AtomState, model: AtomState | None) -> AtomState:
    """Code's verdict and the model's answer together (module docstring)."""
    if model is None or model is AtomState.NO_EVIDENCE:
        return code
    if code is AtomState.NO_EVIDENCE or model is code:
        return model
    if code is AtomState.CONFLICTING and model is AtomState.FAILS:
        return AtomState.FAILS
    return AtomState.CONFLICTING


def needs_question(
    atom: Atom,
    code: AtomState,
    *,
    ask_decided: bool = True,
    kinds: Collection[str] | None = None,
) -> bool:
    """Atoms of `kinds` (every kind when None) code could not decide; with `ask_decided`,
    findings code decided too."""
    if kinds is not None and atom.kind not in kinds:
        return False
    return code not in _CODE_FINAL or (ask_decided and isinstance(atom, FindingAtom))


@dataclass
class _Run:
    """What one criterion's questions change: the trace, the usage, the messages sent."""

    steps: list[ReasoningStep] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    messages: list[Message] = field(default_factory=list)

    def step(self, kind: StepKind, content: str = "", **extra: object) -> None:
        self.steps.append(
            ReasoningStep(index=len(self.steps), kind=kind, content=content[:500], **extra)
        )


@dataclass(frozen=True, slots=True)
class _Question:
    atom: Atom
    code: AtomResult
    snippets: list[Snippet]


@dataclass(frozen=True, slots=True)
class AtomAsked:
    """What the model said about one atom and what code made of it (the harness reads this)."""

    answer: AtomAnswer | None
    """The parsed answer; None when the reply did not parse."""
    ids: list[str]
    """The cited ids, deduplicated, in the model's order."""
    ids_valid: bool
    """Every cited id was shown and its snippet verifies against the case."""
    verified: list[CaseEvidence]
    """The cited snippets' verified evidence (empty unless `ids_valid`)."""
    said: AtomState | None
    """`model_state` of the answer, before the consistency check."""
    negated: AtomAnswer | None = None
    """The answer to the negated question, when it was asked and parsed."""
    negated_asked: bool = False
    replies: tuple[LLMReply, ...] = ()

    @property
    def final(self) -> AtomState | None:
        """The model's state after the consistency check: a "yes" that holds stands only when
        the negated question was answered, and not with "yes"."""
        refuted = self.negated is None or self.negated.answer == "yes"
        if self.said is AtomState.HOLDS and self.negated_asked and refuted:
            return AtomState.CONFLICTING
        return self.said


class AtomQuestionController:
    """Decides a criterion that has conditions: code's atoms plus the model's verified answers.

    The ReAct controller hands it every criterion with conditions; it reports as `react`.
    `answer_format="json_schema"` asks for constrained JSON text instead of a tool call (the
    `local` provider); `check_yes` asks every "yes" that would hold again in negated form;
    `ask_decided=False` asks only about atoms code left undecided, and leaves a criterion whose
    data says silence means "not applicable" at that (small models: on the labeled atom
    questions their answers about findings code had decided only turned right verdicts into
    conflicts, and on the tuning split every "yes" they gave about an applicability code found
    silent was wrong, `docs/local-llm.md`); `model_kinds` are the atom kinds put to the model
    (all when None).
    """

    name = "react"

    def __init__(
        self,
        *,
        llm: LLMClient,
        prompt: Prompt,
        conditions: ConditionsController,
        fallback: Controller | None,
        token_budget: int = 6000,
        abstain_below: float = 0.65,
        max_output_tokens: int = 200,
        answer_format: AnswerFormat = "tool",
        check_yes: bool = False,
        ask_decided: bool = True,
        model_kinds: Collection[str] | None = None,
    ) -> None:
        self._llm = llm
        self._prompt = prompt
        self._conditions = conditions
        self._fallback = fallback
        self._token_budget = token_budget
        self._abstain_below = abstain_below
        self._max_output_tokens = max_output_tokens
        self._answer_format: AnswerFormat = answer_format
        self._check_yes = check_yes
        self._ask_decided = ask_decided
        self._model_kinds = None if model_kinds is None else frozenset(model_kinds)
        self._spec = answer_spec(prompt.tool_descriptions.get(ANSWER, _ANSWER_DESCRIPTION))
        self._schemas = answer_schemas()

    @property
    def prompt_id(self) -> str:
        return self._prompt.prompt_id

    def asks_about(self, atom: Atom, code: AtomState) -> bool:
        """Whether a criterion's evaluation puts this atom to the model, given code's verdict."""
        return needs_question(atom, code, ask_decided=self._ask_decided, kinds=self._model_kinds)

    async def evaluate(self, task: CriterionTask) -> CriterionResult:
        started = time.perf_counter()
        run = _Run()
        task.trace.messages = run.messages
        try:
            result = await self._decide(task, run)
        except LLMError as exc:
            result = await self._after_llm_failure(task, run, exc)
        latency = (time.perf_counter() - started) * 1000
        return result.model_copy(
            update={"usage": result.usage.model_copy(update={"latency_ms": latency})}
        )

    async def _decide(self, task: CriterionTask, run: _Run) -> CriterionResult:
        conditions = task.criterion.conditions
        if conditions is None:
            return await self._conditions.evaluate(task)
        citations = cite_policy(task.policy, task.criterion.quote)
        run.step(
            StepKind.OBSERVATION,
            f"criterion quote found in node {citations[0].node_id}"
            if citations
            else "criterion quote not found in the policy tree",
        )
        questions = await asyncio.to_thread(self._prepare, task, conditions)
        atoms: list[AtomResult] = []
        last_input_tokens = 0
        settled = self._inapplicable_by_code(conditions, questions)
        for question in questions:
            run.step(StepKind.OBSERVATION, _code_line(question.code), tool="check_atom")
            asked = (
                not settled
                and self.asks_about(question.atom, question.code.state)
                and bool(question.snippets)
            )
            if not asked:
                atoms.append(question.code)
                continue
            if run.usage.total_tokens + last_input_tokens > self._token_budget:
                run.step(StepKind.OBSERVATION, f"{question.atom.id}: token budget, not asked")
                atoms.append(question.code)
                continue
            outcome = await self._ask_atom(task, run, question)
            last_input_tokens = outcome.replies[0].usage.input_tokens
            atoms.append(self._judge(run, question, outcome))
        verdict = conclude(task.case, conditions, atoms)
        run.step(StepKind.DECISION, f"{verdict.status.value}: {verdict.rationale}")
        return self._result(
            task,
            run,
            verdict.status,
            verdict.confidence,
            verdict.rationale,
            reason=verdict.reason,
            atoms=atoms,
            evidence=verdict.evidence,
            citations=citations,
        )

    def _inapplicable_by_code(self, conditions: Conditions, questions: list[_Question]) -> bool:
        """True when code alone shows the criterion does not apply and no answer may change it:
        its applicability fails, or (without `ask_decided`) nothing speaks to it and the
        criterion's data says that silence means "not applicable"."""
        if conditions.applies_if is None:
            return False
        head = [q for q in questions if q.code.applicability]
        applies = combine(conditions.applies_if, {q.code.atom_id: q.code.state for q in head})
        if applies is AtomState.NO_EVIDENCE and not self._ask_decided:
            return conditions.when_applicability_unknown == "not_applicable"
        if any(self.asks_about(q.atom, q.code.state) for q in head):
            return False
        return applies is AtomState.FAILS

    def _prepare(self, task: CriterionTask, conditions: Conditions) -> list[_Question]:
        """Code's verdict and the snippets of every atom (CPU-bound: runs in a thread)."""
        reading = self._conditions.reading(task.case)
        results = evaluate_conditions(conditions, reading, self._conditions.min_fact_confidence)
        return [
            _Question(
                atom, result, snippets_for(atom, reading, self._conditions.min_fact_confidence)
            )
            for atom, result in zip(conditions.atoms(), results, strict=True)
        ]

    async def ask_atom(
        self, task: CriterionTask, atom: Atom, code: AtomResult, snippets: list[Snippet]
    ) -> AtomAsked:
        """Ask one atom's question (and its negated form when `check_yes`), outside a criterion
        run: what `eval atoms` measures. Raises `LLMError` like any call."""
        return await self._ask_atom(task, _Run(), _Question(atom, code, snippets))

    async def _ask_atom(self, task: CriterionTask, run: _Run, question: _Question) -> AtomAsked:
        """Ask, verify the cited ids, read the answer, and check a "yes" the other way round."""
        reply = await self._ask(task, run, question, question_for(question.atom))
        answer = parse_answer(reply)
        offered = {snippet.id: snippet for snippet in question.snippets}
        ids = list(dict.fromkeys(answer.evidence)) if answer else []
        cited = [offered[i] for i in ids if i in offered]
        verified = [v for v in (verify_case_evidence(task.case, s.evidence) for s in cited) if v]
        ids_valid = len(cited) == len(ids) and len(verified) == len(cited)
        if not ids_valid:
            cited, verified = [], []
        said = model_state(question.atom, answer, cited, abstain_below=self._abstain_below)
        self._record_answer(run, reply, answer)
        outcome = AtomAsked(answer, ids, ids_valid, verified, said, replies=(reply,))
        if not (self._check_yes and said is AtomState.HOLDS):
            return outcome
        if run.usage.total_tokens + reply.usage.input_tokens > self._token_budget:
            # The "yes" cannot be checked within the budget, so it does not stand alone.
            run.step(StepKind.OBSERVATION, f"{question.atom.id}: token budget, not checked")
            return AtomAsked(answer, ids, ids_valid, verified, said, negated_asked=True,
                             replies=(reply,))  # fmt: skip
        negated_reply = await self._ask(task, run, question, negated_question_for(question.atom))
        negated = parse_answer(negated_reply)
        run.step(
            StepKind.OBSERVATION,
            f"{question.atom.id}: negated question, model "
            f"{negated.answer if negated else 'no answer'}",
            tool="ask_atom_negated",
        )
        return AtomAsked(
            answer,
            ids,
            ids_valid,
            verified,
            said,
            negated=negated,
            negated_asked=True,
            replies=(reply, negated_reply),
        )

    async def _ask(
        self, task: CriterionTask, run: _Run, question: _Question, text: str
    ) -> LLMReply:
        user = Message(role="user", content=_question_text(question, text))
        system = Message(role="system", content=self._prompt.system)
        if self._answer_format == "json_schema":
            ids = tuple(snippet.id for snippet in question.snippets)
            request = LLMRequest(
                messages=(system, user),
                output_schema=self._schemas.get(ids) or answer_schema(ids),
                max_output_tokens=self._max_output_tokens,
            )
        else:
            request = LLMRequest(
                messages=(system, user),
                tools=(self._spec,),
                tool_choice=ANSWER,
                max_output_tokens=self._max_output_tokens,
            )
        reply = await complete_recorded(self._llm, request, task.trace.interactions)
        run.usage = run.usage + reply.usage
        if not run.messages:
            run.messages.append(system)
        run.messages += [
            user,
            Message(role="assistant", content=reply.content or "", tool_calls=reply.tool_calls),
        ]
        return reply

    @staticmethod
    def _record_answer(run: _Run, reply: LLMReply, answer: AtomAnswer | None) -> None:
        call = next((c for c in reply.tool_calls if c.name == ANSWER), None)
        run.step(
            StepKind.TOOL_CALL,
            tool=ANSWER,
            tool_call_id=call.id if call else None,
            arguments=answer.model_dump() if answer else {"_unparsed": reply.content[:200]},
        )

    def _judge(self, run: _Run, question: _Question, outcome: AtomAsked) -> AtomResult:
        said = outcome.final
        code = question.code
        state = merge_states(code.state, said)
        answer = outcome.answer.answer if outcome.answer else "no answer"
        call = next((c for c in outcome.replies[0].tool_calls if c.name == ANSWER), None)
        run.step(
            StepKind.OBSERVATION,
            f"{question.atom.id}: model {answer} {outcome.ids}"
            f"{'' if outcome.ids_valid else ' (ids invalid, set aside)'} -> "
            f"{said.value if said else 'unknown'}; code {code.state.value} -> {state.value}",
            tool="ask_atom",
            tool_call_id=call.id if call else None,
        )
        if said is None or said is AtomState.NO_EVIDENCE:
            return code
        both_sides = state is AtomState.CONFLICTING
        checked = " after the negated question" if said is not outcome.said else ""
        return code.model_copy(
            update={
                "state": state,
                "note": f"model: {said.value}{checked} ({', '.join(outcome.ids)}); code: "
                f"{code.state.value} {code.note}"[:300],
                "evidence": [*outcome.verified, *code.evidence] if both_sides else outcome.verified,
                "decided_by": "model",
                "by_silence": False,
            }
        )

    async def _after_llm_failure(
        self, task: CriterionTask, run: _Run, error: LLMError
    ) -> CriterionResult:
        run.step(StepKind.ERROR, f"LLM {error.kind} error: {error}", is_error=True)
        if self._fallback is not None:
            return as_llm_fallback(
                await self._fallback.evaluate(task),
                steps=run.steps,
                usage=run.usage,
                prompt_id=self._prompt.prompt_id,
                provider=self._llm.provider,
                model=self._llm.model,
            )
        rationale = f"The LLM failed ({error.kind}); no decision was made."
        return self._result(
            task, run, CriterionStatus.UNCERTAIN, 0.0, rationale, reason=llm_failure_reason(error)
        )

    def _result(
        self,
        task: CriterionTask,
        run: _Run,
        status: CriterionStatus,
        confidence: float,
        rationale: str,
        *,
        reason: ReasonCode | None,
        atoms: list[AtomResult] | None = None,
        evidence: list[CaseEvidence] | None = None,
        citations: list[PolicyCitation] | None = None,
    ) -> CriterionResult:
        return CriterionResult(
            criterion_id=task.criterion.criterion_id,
            status=status,
            confidence=confidence,
            rationale=rationale,
            policy_citations=citations or [],
            case_evidence=evidence or [],
            reason_code=reason,
            atoms=atoms or [],
            reasoning_trace=list(run.steps),
            controller=self.name,
            prompt_id=self._prompt.prompt_id,
            provider=self._llm.provider,
            model=self._llm.model,
            usage=run.usage + Usage(tool_calls=len(atoms or [])),
        )


def _question_text(question: _Question, text: str) -> str:
    """The user message: the numbered snippets, then the question, as JSON (data, not orders).
    Snippets first, so the negated question shares the whole prefix with the first one."""
    return json.dumps(
        {
            "snippets": [
                {"id": s.id, "source": s.source, "text": s.text} for s in question.snippets
            ],
            "question": text,
        },
        ensure_ascii=False,
    )


def _code_line(result: AtomResult) -> str:
    prefix = "applies if " if result.applicability else ""
    return f"{prefix}{result.atom_id} ({result.kind}) {result.label}: {result.state.value}"
