"""The ReAct loop (DESIGN.md, "The ReAct loop"): an LLM decides which tools to call, then `finish`.

Steps of one criterion:
    1. The conversation starts as [system prompt, task]; the system prompt and the tool specs
       are the same for every criterion, so providers can cache that prefix.
    2. Before each call the token budget is checked; then the LLM answers.
    3. Tool calls are validated and run (concurrently); each result is a `tool` message tied to
       its `tool_call_id`. Bad calls get an error result that says how to fix them.
    4. A plain-text answer gets one continuation prompt.
    5. `finish` ends the loop once its citations verify. Unverifiable ones are sent back once;
       after that they are dropped (`invalid_citation`, lower confidence).

Exits:
    - `finish` accepted                        -> the model's result (abstention below threshold)
    - iteration limit or token budget reached  -> one last call allowing only `finish`, else a
                                                  best-effort `uncertain` with the reason
    - LLM failure after retries                -> the heuristic's result (`llm_fallback`) or
                                                  `uncertain` with the error's reason, per settings
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from reasoning_service.errors import LLMError, PermanentLLMError
from reasoning_service.llm.base import LLMClient
from reasoning_service.llm.recording import interaction_sink
from reasoning_service.models import (
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
    ToolCall,
    ToolChoice,
    Usage,
)
from reasoning_service.models.task import Controller, CriterionTask
from reasoning_service.prompts import Prompt
from reasoning_service.tools.citations import verify_case_evidence, verify_policy_citation
from reasoning_service.tools.executor import (
    FINISH,
    ToolExecutor,
    ToolOutcome,
    parse_arguments,
    tool_specs,
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
_DECISIVE = frozenset({CriterionStatus.MET, CriterionStatus.NOT_MET})
"""Statuses that claim the case shows something: they stand only on verified case evidence."""


@dataclass(frozen=True)
class ReActLimits:
    max_iterations: int = 10
    token_budget: int = 6000
    abstain_below: float = 0.65
    max_output_tokens: int = 800


@dataclass
class LoopState:
    """What one run changes: the conversation, the trace and the usage."""

    messages: list[Message]
    steps: list[ReasoningStep] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    last_input_tokens: int = 0
    """Prompt size of the latest call: the least the next call will cost."""
    nudged: bool = False
    citations_retried: bool = False

    def step(self, kind: StepKind, content: str = "", **extra: Any) -> None:
        self.steps.append(ReasoningStep(index=len(self.steps), kind=kind, content=content, **extra))


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
        limits: ReActLimits = ReActLimits(),
    ) -> None:
        self._llm = llm
        self._prompt = prompt
        self._retrieval = retrieval
        self._tree_search = tree_search
        self._fallback = fallback
        self._limits = limits
        self._specs = tool_specs(prompt.tool_descriptions)
        self._finish_spec = tuple(s for s in self._specs if s.name == FINISH)

    @property
    def prompt_id(self) -> str:
        return self._prompt.prompt_id

    async def evaluate(self, task: CriterionTask) -> CriterionResult:
        started = time.perf_counter()
        state = LoopState(messages=initial_messages(self._prompt, task))
        task.trace.messages = state.messages
        token = interaction_sink.set(task.trace.interactions)
        try:
            result = await self._run(task, state)
        except LLMError as exc:
            result = await self._after_llm_failure(task, state, exc)
        finally:
            interaction_sink.reset(token)
        latency = (time.perf_counter() - started) * 1000
        return result.model_copy(
            update={"usage": result.usage.model_copy(update={"latency_ms": latency})}
        )

    async def _run(self, task: CriterionTask, state: LoopState) -> CriterionResult:
        executor = ToolExecutor(task, retrieval=self._retrieval, tree_search=self._tree_search)
        for _ in range(self._limits.max_iterations):
            if budget_exhausted(state, self._limits):
                return await self._force_finish(task, state, ReasonCode.TOKEN_BUDGET)
            reply = await self._call(state, self._specs, ToolChoice.AUTO)
            finish = next((c for c in reply.tool_calls if c.name == FINISH), None)
            if finish is not None:
                self._skip_calls(state, [c for c in reply.tool_calls if c is not finish])
                match self._check_finish(task, state, finish, final=False):
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
        self, state: LoopState, tools: tuple[Any, ...], tool_choice: ToolChoice | str
    ) -> LLMReply:
        request = LLMRequest(
            messages=tuple(state.messages),
            tools=tools,
            tool_choice=tool_choice,
            max_output_tokens=self._limits.max_output_tokens,
        )
        reply = await self._llm.complete(request)
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
        state.usage = state.usage + Usage(tool_calls=1, cache_hits=int(outcome.cache_hit))
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
        reply = await self._call(state, self._finish_spec, FINISH)
        finish = next((c for c in reply.tool_calls if c.name == FINISH), None)
        if finish is not None:
            self._skip_calls(state, [c for c in reply.tool_calls if c is not finish])
            checked = self._check_finish(task, state, finish, final=True, reason=reason)
            if isinstance(checked, FinishAccepted):
                return checked.result
        rationale = f"No verified result: {reason.value.replace('_', ' ')} reached."
        state.step(StepKind.DECISION, rationale)
        return self._result(task, state, CriterionStatus.UNCERTAIN, 0.0, rationale, [], [], reason)

    def _check_finish(
        self,
        task: CriterionTask,
        state: LoopState,
        call: ToolCall,
        *,
        final: bool,
        reason: ReasonCode | None = None,
    ) -> FinishAccepted | FinishRejected:
        arguments = parse_arguments(call)
        if isinstance(arguments, str):
            return FinishRejected(arguments)
        policy_citations, case_evidence, problems = verify_citations(task, arguments)
        status = CriterionStatus(arguments["status"])
        decisive = status in _DECISIVE
        if decisive and not case_evidence and not problems:
            problems.append(
                f"status {status.value} needs at least one case_evidence quote that shows it"
            )
        if problems and not final and not state.citations_retried:
            state.citations_retried = True
            return FinishRejected(
                "Some citations could not be verified: "
                + "; ".join(problems)
                + ". Copy quotes exactly from tool results (policy quotes from the cited "
                "node's text, case quotes from a document line or fact) and call finish again."
            )
        self._answer(state, ToolOutcome(call.id, FINISH, "accepted"))
        confidence = float(arguments["confidence"])
        if problems:
            reason = ReasonCode.INVALID_CITATION
            confidence *= _CITATION_PENALTY
            if decisive and not case_evidence:
                status = CriterionStatus.UNCERTAIN
        if confidence < self._limits.abstain_below and status is not CriterionStatus.UNCERTAIN:
            status = CriterionStatus.UNCERTAIN
            reason = reason or ReasonCode.LOW_CONFIDENCE
        rationale = str(arguments["rationale"])
        state.step(StepKind.DECISION, f"{status.value} ({confidence:.2f}): {rationale}")
        return FinishAccepted(
            self._result(
                task, state, status, confidence, rationale, policy_citations, case_evidence, reason
            )
        )

    async def _after_llm_failure(
        self, task: CriterionTask, state: LoopState, error: LLMError
    ) -> CriterionResult:
        state.step(StepKind.ERROR, f"LLM {error.kind} error: {error}", is_error=True)
        if self._fallback is not None:
            fallback = await self._fallback.evaluate(task)
            steps = [
                step.model_copy(update={"index": i})
                for i, step in enumerate([*state.steps, *fallback.reasoning_trace])
            ]
            return fallback.model_copy(
                update={
                    "reason_code": ReasonCode.LLM_FALLBACK,
                    "reasoning_trace": steps,
                    "usage": state.usage + fallback.usage,
                    "prompt_id": self._prompt.prompt_id,
                    "provider": self._llm.provider,
                    "model": self._llm.model,
                }
            )
        reason = (
            ReasonCode.LLM_PERMANENT_ERROR
            if isinstance(error, PermanentLLMError)
            else ReasonCode.LLM_TRANSIENT_ERROR
        )
        rationale = f"The LLM failed ({error.kind}); no decision was made."
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


def budget_exhausted(state: LoopState, limits: ReActLimits) -> bool:
    """True when the next call would cross the budget: it resends at least the last prompt."""
    return state.usage.total_tokens + state.last_input_tokens > limits.token_budget


def verify_citations(
    task: CriterionTask, arguments: dict[str, Any]
) -> tuple[list[PolicyCitation], list[CaseEvidence], list[str]]:
    """Keep the citations that verify; describe the ones that do not."""
    policy_citations, case_evidence, problems = [], [], []
    for item in arguments["policy_citations"]:
        citation = PolicyCitation(
            policy_id=task.policy.policy_id, node_id=item["node_id"], quote=item["quote"]
        )
        verified = verify_policy_citation(task.policy, citation)
        if verified is None:
            problems.append(
                f"policy quote {_short(item['quote'])} is not in node {item['node_id']}"
            )
        else:
            policy_citations.append(verified)
    for item in arguments["case_evidence"]:
        evidence = CaseEvidence(
            doc_id=item.get("doc_id"),
            page=item.get("page"),
            field=item.get("field"),
            quote=item["quote"],
        )
        verified_evidence = verify_case_evidence(task.case, evidence)
        if verified_evidence is None:
            where = item.get("doc_id") or item.get("field") or "the case"
            problems.append(f"case quote {_short(item['quote'])} is not in {where}")
        else:
            case_evidence.append(verified_evidence)
    return policy_citations, case_evidence, problems


def _short(text: str, limit: int = 80) -> str:
    return json.dumps(text if len(text) <= limit else text[:limit] + "…")


def _arguments_for_trace(call: ToolCall) -> dict[str, Any] | None:
    try:
        value = json.loads(call.arguments_json or "{}")
    except json.JSONDecodeError:
        return {"_unparsed": call.arguments_json[:200]}
    return value if isinstance(value, dict) else {"_value": value}
