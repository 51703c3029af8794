"""The ReAct loop (DESIGN.md, "The ReAct loop"): an LLM decides which tools to call, then `finish`.

Steps of one criterion:
    1. The conversation starts as [system prompt, task]; the system prompt and the tool specs
       are the same for every criterion, so providers can cache that prefix.
    2. Before each call the token budget is checked; then the LLM answers.
    3. Tool calls are validated and run (concurrently); each result is a `tool` message tied to
       its `tool_call_id`. Bad calls get an error result that says how to fix them.
    4. A plain-text answer gets one continuation prompt.
    5. `finish` ends the loop once its citations verify (found, and fit to be evidence: see
       tools/finish.py). Failed ones are sent back once; after that they are dropped
       (`invalid_citation`, lower confidence) and `met`/`not_met` becomes `uncertain`: a
       decision never stands beside a citation that failed.

A criterion with `conditions` does not run the loop when an atom path is given (`atoms`, built
by the service from `conditions/atom_questions.py`): code decides the atoms it can and the model
answers one narrow question per remaining atom (DESIGN.md, "Criteria as checkable conditions").

Exits:
    - `finish` accepted                        -> the model's result (abstention below threshold)
    - iteration limit or token budget reached  -> one last call allowing only `finish`, else a
                                                  best-effort `uncertain` with the reason
    - LLM failure after retries                -> the heuristic's result (`llm_fallback`) or
                                                  `uncertain` with the error's reason, per settings
    - the evaluation's deadline passes         -> `uncertain` (`deadline`), whatever was under way
                                                  (measured from `CriterionTask.created_at`)
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any

from reasoning_service.agent.loop_state import LoopState, ReActLimits, budget_exhausted
from reasoning_service.errors import LLMError
from reasoning_service.llm.base import LLMClient
from reasoning_service.llm.recording import complete_recorded
from reasoning_service.models import (
    CaseEvidence,
    CriterionResult,
    CriterionStatus,
    LLMReply,
    LLMRequest,
    Message,
    PolicyCitation,
    ReasonCode,
    StepKind,
    ToolCall,
    ToolChoice,
    Usage,
)
from reasoning_service.models.result import as_llm_fallback, llm_failure_reason
from reasoning_service.models.task import Controller, CriterionTask
from reasoning_service.prompts import Prompt
from reasoning_service.tools.citations import CitationRules
from reasoning_service.tools.executor import ToolExecutor, ToolOutcome, tool_specs
from reasoning_service.tools.finish import (
    DECISIVE,
    FINISH,
    check_finish,
    citations_retry_message,
)
from reasoning_service.tools.tree_search import TreeSearch
from retrieval.service import RetrievalService

CONTINUATION_PROMPT = (
    "Continue: call a tool, or call finish with status, confidence, rationale, "
    "policy_citations and case_evidence. Do not answer in plain text."
)
LIMIT_PROMPT = "{reason} reached. Call finish now with the evidence you already have."
_OBSERVATION_CHARS = 500
_CITATION_PENALTY = 0.7
_DEFAULT_LIMITS = ReActLimits()
_DEFAULT_RULES = CitationRules()


@dataclass(frozen=True)
class FinishAccepted:
    result: CriterionResult


@dataclass(frozen=True)
class FinishRejected:
    message: str


class ReActController:
    """LLM agent with tools; `evaluate` never raises for a model or data problem."""

    name = "react"

    def __init__(
        self,
        *,
        llm: LLMClient,
        prompt: Prompt,
        retrieval: RetrievalService | None,
        tree_search: TreeSearch,
        fallback: Controller | None,
        limits: ReActLimits = _DEFAULT_LIMITS,
        atoms: Controller | None = None,
        citation_rules: CitationRules = _DEFAULT_RULES,
    ) -> None:
        """`atoms` decides criteria that have conditions, in place of the loop."""
        self._llm = llm
        self._prompt = prompt
        self._retrieval = retrieval
        self._tree_search = tree_search
        self._fallback = fallback
        self._limits = limits
        self._atoms = atoms
        self._citation_rules = citation_rules
        self._specs = tool_specs(prompt.tool_descriptions)
        self._finish_spec = tuple(s for s in self._specs if s.name == FINISH)

    @property
    def prompt_id(self) -> str:
        return self._prompt.prompt_id

    async def evaluate(self, task: CriterionTask) -> CriterionResult:
        if task.criterion.conditions is not None and self._atoms is not None:
            return await self._atoms.evaluate(task)
        started = time.perf_counter()
        state = LoopState(messages=initial_messages(self._prompt, task))
        task.trace.messages = state.messages
        result = await self._run_until_deadline(task, state)
        latency = (time.perf_counter() - started) * 1000
        return result.model_copy(
            update={"usage": result.usage.model_copy(update={"latency_ms": latency})}
        )

    async def _run_until_deadline(self, task: CriterionTask, state: LoopState) -> CriterionResult:
        """The loop (and its fallback), cut short when the evaluation's deadline passes."""
        deadline_s = self._limits.evaluation_deadline_s
        if deadline_s is None:
            return await self._run_or_fall_back(task, state)
        remaining_s = task.created_at + deadline_s - time.monotonic()
        if remaining_s > 0:
            scope = asyncio.timeout(remaining_s)
            try:
                async with scope:
                    return await self._run_or_fall_back(task, state)
            except TimeoutError:
                if not scope.expired():
                    raise
        rationale = f"No decision: the evaluation deadline ({deadline_s:g} s) passed."
        state.step(StepKind.ERROR, rationale, is_error=True)
        return self._result(
            task, state, CriterionStatus.UNCERTAIN, 0.0, rationale, [], [], ReasonCode.DEADLINE
        )

    async def _run_or_fall_back(self, task: CriterionTask, state: LoopState) -> CriterionResult:
        try:
            return await self._run(task, state)
        except LLMError as exc:
            return await self._after_llm_failure(task, state, exc)

    async def _run(self, task: CriterionTask, state: LoopState) -> CriterionResult:
        executor = ToolExecutor(task, retrieval=self._retrieval, tree_search=self._tree_search)
        for _ in range(self._limits.max_iterations):
            if budget_exhausted(state, self._limits):
                return await self._force_finish(task, state, ReasonCode.TOKEN_BUDGET)
            reply = await self._call(task, state, self._specs, ToolChoice.AUTO)
            finish = next((c for c in reply.tool_calls if c.name == FINISH), None)
            if finish is not None:
                self._skip_calls(state, [c for c in reply.tool_calls if c is not finish])
                match self._accept_finish(task, state, finish, final=False):
                    case FinishAccepted(result):
                        return result
                    case FinishRejected(message):
                        self._answer(state, ToolOutcome(finish.id, FINISH, message, is_error=True))
                continue
            if reply.tool_calls:
                for outcome in await executor.execute(reply.tool_calls):
                    self._answer(state, outcome)
                continue
            if state.nudged:
                return await self._force_finish(task, state, ReasonCode.NO_FINISH)
            state.nudged = True
            state.messages.append(Message(role="user", content=CONTINUATION_PROMPT))
        return await self._force_finish(task, state, ReasonCode.MAX_ITERATIONS)

    async def _call(
        self,
        task: CriterionTask,
        state: LoopState,
        tools: tuple[Any, ...],
        tool_choice: ToolChoice | str,
    ) -> LLMReply:
        request = LLMRequest(
            messages=tuple(state.messages),
            tools=tools,
            tool_choice=tool_choice,
            max_output_tokens=self._limits.max_output_tokens,
        )
        reply = await complete_recorded(self._llm, request, task.trace.interactions)
        state.usage = state.usage + reply.usage
        state.last_input_tokens = reply.usage.input_tokens
        # Servers such as llama.cpp reject an assistant tool-call message whose content is null.
        state.messages.append(
            Message(role="assistant", content=reply.content or "", tool_calls=reply.tool_calls)
        )
        if reply.content.strip():
            state.step(StepKind.THOUGHT, reply.content.strip())
        for call in reply.tool_calls:
            state.step(
                StepKind.TOOL_CALL,
                tool=call.name,
                tool_call_id=call.id,
                arguments=_arguments_for_trace(call),
            )
        return reply

    def _answer(self, state: LoopState, outcome: ToolOutcome) -> None:
        """Append a tool result (always tied to its call) and its trace step."""
        state.messages.append(
            Message(
                role="tool",
                content=outcome.content,
                tool_call_id=outcome.tool_call_id,
                is_error=outcome.is_error,
            )
        )
        state.usage = (
            state.usage + outcome.usage + Usage(tool_calls=1, cache_hits=int(outcome.cache_hit))
        )
        state.step(
            StepKind.OBSERVATION,
            outcome.content[:_OBSERVATION_CHARS],
            tool=outcome.name,
            tool_call_id=outcome.tool_call_id,
            is_error=outcome.is_error,
            cache_hit=outcome.cache_hit,
            duration_ms=outcome.duration_ms,
        )

    def _skip_calls(self, state: LoopState, calls: list[ToolCall]) -> None:
        for call in calls:
            message = "Not run: finish was called in the same turn."
            self._answer(state, ToolOutcome(call.id, call.name, message, is_error=True))

    async def _force_finish(
        self, task: CriterionTask, state: LoopState, reason: ReasonCode
    ) -> CriterionResult:
        """One last call that may only `finish`; else a best-effort `uncertain`."""
        label = {
            ReasonCode.TOKEN_BUDGET: "The token budget is",
            ReasonCode.MAX_ITERATIONS: "The iteration limit is",
        }.get(reason, "The turn limit is")
        state.messages.append(Message(role="user", content=LIMIT_PROMPT.format(reason=label)))
        reply = await self._call(task, state, self._finish_spec, FINISH)
        finish = next((c for c in reply.tool_calls if c.name == FINISH), None)
        if finish is not None:
            self._skip_calls(state, [c for c in reply.tool_calls if c is not finish])
            checked = self._accept_finish(task, state, finish, final=True, reason=reason)
            if isinstance(checked, FinishAccepted):
                return checked.result
        rationale = f"No verified result: {reason.value.replace('_', ' ')} reached."
        state.step(StepKind.DECISION, rationale)
        return self._result(task, state, CriterionStatus.UNCERTAIN, 0.0, rationale, [], [], reason)

    def _accept_finish(
        self,
        task: CriterionTask,
        state: LoopState,
        call: ToolCall,
        *,
        final: bool,
        reason: ReasonCode | None = None,
    ) -> FinishAccepted | FinishRejected:
        """The agent's policy over `check_finish`: problems go back to the model once (unless
        this is the last call); then unverified citations are dropped, confidence is lowered,
        and a decision beside a failed citation or below the threshold becomes `uncertain`."""
        checked = check_finish(task, call, self._citation_rules)
        if isinstance(checked, str):
            return FinishRejected(checked)
        if checked.problems and not final and not state.citations_retried:
            state.citations_retried = True
            return FinishRejected(citations_retry_message(checked.problems))
        self._answer(state, ToolOutcome(call.id, FINISH, "accepted"))
        status, confidence = checked.status, checked.confidence
        if checked.problems:
            reason = ReasonCode.INVALID_CITATION
            confidence *= _CITATION_PENALTY
            if status in DECISIVE:
                status = CriterionStatus.UNCERTAIN
        if confidence < self._limits.abstain_below and status is not CriterionStatus.UNCERTAIN:
            status = CriterionStatus.UNCERTAIN
            reason = reason or ReasonCode.LOW_CONFIDENCE
        rationale = checked.rationale
        state.step(StepKind.DECISION, f"{status.value} ({confidence:.2f}): {rationale}")
        return FinishAccepted(
            self._result(
                task,
                state,
                status,
                confidence,
                rationale,
                checked.policy_citations,
                checked.case_evidence,
                reason,
            )
        )

    async def _after_llm_failure(
        self, task: CriterionTask, state: LoopState, error: LLMError
    ) -> CriterionResult:
        state.step(StepKind.ERROR, f"LLM {error.kind} error: {error}", is_error=True)
        if self._fallback is not None:
            return as_llm_fallback(
                await self._fallback.evaluate(task),
                steps=state.steps,
                usage=state.usage,
                prompt_id=self._prompt.prompt_id,
                provider=self._llm.provider,
                model=self._llm.model,
            )
        rationale = f"The LLM failed ({error.kind}); no decision was made."
        reason = llm_failure_reason(error)
        return self._result(task, state, CriterionStatus.UNCERTAIN, 0.0, rationale, [], [], reason)

    def _result(
        self,
        task: CriterionTask,
        state: LoopState,
        status: CriterionStatus,
        confidence: float,
        rationale: str,
        policy_citations: list[PolicyCitation],
        case_evidence: list[CaseEvidence],
        reason: ReasonCode | None,
    ) -> CriterionResult:
        return CriterionResult(
            criterion_id=task.criterion.criterion_id,
            status=status,
            confidence=round(min(max(confidence, 0.0), 1.0), 4),
            rationale=rationale,
            policy_citations=policy_citations,
            case_evidence=case_evidence,
            reason_code=reason,
            reasoning_trace=list(state.steps),
            controller=self.name,
            prompt_id=self._prompt.prompt_id,
            provider=self._llm.provider,
            model=self._llm.model,
            usage=state.usage,
        )


def initial_messages(prompt: Prompt, task: CriterionTask) -> list[Message]:
    """System prompt (stable across criteria) then the task (criterion and case outline)."""
    case = task.case
    outline = {
        "criterion": {"id": task.criterion.criterion_id, "text": task.criterion.text},
        "policy": {"id": task.policy.policy_id, "title": task.policy.title},
        "case": {
            "case_id": case.case_id,
            "as_of": case.reference_date.isoformat(),
            "request": case.request.service,
            "patient": case.patient.model_dump(exclude_none=True),
            "fact_fields": sorted({f.field for f in case.facts}),
            "documents": [
                {"doc_id": d.doc_id, "title": d.title, "pages": len(d.pages)}
                for d in case.documents
            ],
        },
    }
    return [
        Message(role="system", content=prompt.system),
        Message(role="user", content=json.dumps(outline, ensure_ascii=False)),
    ]


def _arguments_for_trace(call: ToolCall) -> dict[str, Any] | None:
    try:
        value = json.loads(call.arguments_json or "{}")
    except json.JSONDecodeError:
        return {"_unparsed": call.arguments_json[:200]}
    return value if isinstance(value, dict) else {"_value": value}
