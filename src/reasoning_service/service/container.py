"""Builds the service graph once (CLI or app lifespan) and closes it: nothing is a global."""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass

from reasoning_service.agent.loop_state import ReActLimits
from reasoning_service.agent.react_controller import ReActController
from reasoning_service.conditions import ConditionsController, ConditionsLibrary, load_vocabulary
from reasoning_service.conditions.atom_questions import (
    AtomQuestionController,
    check_answer_schemas,
)
from reasoning_service.errors import ConfigError
from reasoning_service.llm.base import LLMClient
from reasoning_service.llm.factory import build_llm_client, with_tool_calling_mode
from reasoning_service.llm.local_server import (
    LocalLlamaServer,
    compile_json_schemas,
    find_model,
    is_runtime_installed,
)
from reasoning_service.llm.recording import RecordingLLMClient, record_to_current_task
from reasoning_service.logging_setup import SecretMask
from reasoning_service.metrics import MeteredLLMClient, Metrics
from reasoning_service.models.task import Controller
from reasoning_service.prompts import Prompt, load_prompt
from reasoning_service.rollout.flags import FlagSource, RolloutFlags
from reasoning_service.rollout.routing import Router
from reasoning_service.rollout.shadow import ShadowRunner
from reasoning_service.service.admission import Admission
from reasoning_service.service.evaluation import EvaluationService
from reasoning_service.service.jobs import JobQueue
from reasoning_service.service.policies import PolicyService, TreeLimits
from reasoning_service.service.readiness import Readiness
from reasoning_service.settings import Settings
from reasoning_service.store import Store, open_store
from reasoning_service.tools.citations import CitationRules
from reasoning_service.tools.tree_search import LexicalTreeSearch, LLMTreeSearch, TreeSearch
from retrieval.service import RetrievalService

logger = logging.getLogger(__name__)


@dataclass
class Services:
    """Everything a request needs, built from one Settings."""

    settings: Settings
    store: Store
    retrieval: RetrievalService
    policies: PolicyService
    router: Router
    evaluations: EvaluationService
    conditions: ConditionsController
    """The deterministic controller, shared by routing, fallbacks and offline runs."""
    admission: Admission
    """How many API evaluations run and wait at once (the CLI and offline runs don't use it)."""
    readiness: Readiness
    """/readyz's cached store check."""
    conditions_threads: ThreadPoolExecutor
    """Where the conditions controller's CPU-bound work runs (`settings.conditions_threads`)."""
    metrics: Metrics | None = None
    shadow: ShadowRunner | None = None
    llm: LLMClient | None = None
    local_server: LocalLlamaServer | None = None
    """The llama.cpp server this process started for the `local` provider."""
    jobs: JobQueue | None = None
    """Asynchronous evaluations; None on SQLite (the queue lives in PostgreSQL)."""

    async def aclose(self) -> None:
        """Stop in dependency order: shadow runs use the LLM, the LLM uses the local server;
        the queue and everything else use the store."""
        if self.jobs is not None:
            await self.jobs.aclose()
        if self.shadow is not None:
            await self.shadow.aclose()
        if self.llm is not None:
            await self.llm.aclose()
        if self.local_server is not None:
            await self.local_server.aclose()
        await self.retrieval.aclose()
        await self.store.aclose()
        self.conditions_threads.shutdown(wait=False, cancel_futures=True)


async def build_services(
    settings: Settings, *, store: Store | None = None, llm: LLMClient | None = None
) -> Services:
    """Open the store, rebuild the search index, seed the examples, wire the controllers.

    `llm` replaces the client built from settings (tests pass a `ScriptedLLM`); it is wrapped
    for recording like any other, so traces keep every call.
    """
    store = store or open_store(
        settings.store_url,
        mask=SecretMask(settings.secret_values()),
        pool_size=settings.db_pool_size,
    )
    retrieval = RetrievalService()
    library = ConditionsLibrary.from_folder(settings.examples_dir)
    limits = TreeLimits(settings.max_policy_nodes, settings.max_policy_depth)
    policies = PolicyService(store, retrieval, library, limits=limits)
    indexed = await policies.index_stored()
    if settings.seed_examples and settings.examples_dir.exists():
        await policies.seed_from_folder(settings.examples_dir)
    conditions_threads = ThreadPoolExecutor(
        max_workers=settings.conditions_threads, thread_name_prefix="conditions"
    )
    heuristic = conditions_controller(settings, executor=conditions_threads)
    metrics = Metrics()
    local_server = None
    if settings.llm_provider == "local" and settings.llm_base_url is None and llm is None:
        local_server = await start_local_server(settings)
        settings = settings.model_copy(update=_local_defaults(settings, local_server))
    llm = _llm_client(settings, llm, metrics)
    if llm is not None and settings.atom_questions:
        check_atom_schemas(settings)
    react = _react_controller(settings, llm, retrieval, heuristic) if llm is not None else None
    if settings.candidate_prompt_id:
        load_prompt(settings.prompts_dir, settings.candidate_prompt_id)  # fail fast at start-up
    flags = FlagSource(
        RolloutFlags(settings.controller, settings.candidate_prompt_id),
        settings.flags_file,
        check_prompt=lambda prompt_id: load_prompt(settings.prompts_dir, prompt_id),
    )
    router = Router(
        settings.controller,
        heuristic=heuristic,
        react=react,
        salt=settings.ab_salt,
        flags=flags,
        candidate_for=_candidate_factory(settings, llm, retrieval, heuristic),
    )
    shadow = ShadowRunner(
        store=store,
        metrics=metrics,
        criterion_concurrency=settings.criterion_concurrency,
        max_pending=settings.shadow_max_pending,
    )
    evaluations = EvaluationService(
        store=store,
        policies=policies,
        router=router,
        criterion_concurrency=settings.criterion_concurrency,
        metrics=metrics,
        shadow=shadow,
    )
    jobs = None
    if store.kind == "postgresql" and settings.database_url is not None:
        jobs = await JobQueue(settings.database_url, store).open()
    logger.info("services ready", extra={"policies_indexed": indexed})
    return Services(
        settings=settings,
        store=store,
        retrieval=retrieval,
        policies=policies,
        router=router,
        evaluations=evaluations,
        conditions=heuristic,
        admission=Admission(
            limit=settings.max_evaluations_in_progress,
            queue=settings.max_evaluations_waiting,
            max_wait_s=settings.admission_max_wait_s,
        ),
        readiness=Readiness(store),
        conditions_threads=conditions_threads,
        metrics=metrics,
        shadow=shadow,
        llm=llm,
        local_server=local_server,
        jobs=jobs,
    )


def check_atom_schemas(settings: Settings) -> int:
    """Validate the atom answer schemas once; for the `local` provider with the runtime here,
    also convert each to llama.cpp's grammar (its server would silently fall back to plain JSON).

    Raises:
        ConfigError: a schema is invalid or does not convert.
    """
    local = settings.effective_atom_answer_format == "json_schema" and is_runtime_installed()
    return check_answer_schemas(compile_json_schemas if local else None)


def _llm_client(settings: Settings, given: LLMClient | None, metrics: Metrics) -> LLMClient | None:
    """The given client recorded per task, else the configured stack; None without a provider.

    Metered outermost (one timing per call, retries included); retries are counted by the
    retry layer's `on_retry` hook."""
    if given is not None:
        client: LLMClient | None = with_tool_calling_mode(
            RecordingLLMClient(given, record_to_current_task), settings.effective_tool_calling_mode
        )
    else:
        client = build_llm_client(settings, sink=record_to_current_task, on_retry=metrics.on_retry)
    return MeteredLLMClient(client, metrics) if client is not None else None


def _candidate_factory(
    settings: Settings, llm: LLMClient | None, retrieval: RetrievalService, fallback: Controller
) -> Callable[[str], Controller] | None:
    """Builds the ReAct controller of a candidate prompt named by the flags file (or settings)."""
    if llm is None:
        return None
    client = llm

    def candidate_for(prompt_id: str) -> Controller:
        prompt = load_prompt(settings.prompts_dir, prompt_id)
        return _react_controller(settings, client, retrieval, fallback, prompt)

    return candidate_for


def _react_controller(
    settings: Settings,
    llm: LLMClient,
    retrieval: RetrievalService,
    heuristic: ConditionsController,
    prompt: Prompt | None = None,
    *,
    fallback: bool = True,
) -> ReActController:
    """The ReAct loop; criteria with conditions go to the atom questions when enabled. Both
    fall back to `heuristic` on LLM failure when `fallback` and the settings allow it."""
    lexical = LexicalTreeSearch(retrieval)
    tree_search: TreeSearch = (
        LLMTreeSearch(llm, lexical) if settings.tree_search == "llm" else lexical
    )
    backup = heuristic if fallback and settings.llm_fallback == "heuristic" else None
    atoms = _atom_controller(settings, llm, heuristic, backup) if settings.atom_questions else None
    return ReActController(
        llm=llm,
        prompt=prompt or load_prompt(settings.prompts_dir, settings.prompt_id),
        retrieval=retrieval,
        tree_search=tree_search,
        fallback=backup,
        limits=ReActLimits(
            max_iterations=settings.max_iterations,
            token_budget=settings.token_budget,
            abstain_below=settings.abstain_below,
            max_output_tokens=settings.llm_max_output_tokens,
            evaluation_deadline_s=settings.evaluation_deadline_s,
        ),
        atoms=atoms,
        citation_rules=CitationRules(min_words=settings.citation_min_words),
    )


def _atom_controller(
    settings: Settings,
    llm: LLMClient,
    heuristic: ConditionsController,
    fallback: Controller | None,
    *,
    check_yes: bool | None = None,
    prompt: Prompt | None = None,
) -> AtomQuestionController:
    return AtomQuestionController(
        llm=llm,
        prompt=prompt or load_prompt(settings.prompts_dir, settings.effective_atom_prompt_id),
        conditions=heuristic,
        fallback=fallback,
        token_budget=settings.token_budget,
        abstain_below=settings.abstain_below,
        max_output_tokens=min(settings.llm_max_output_tokens, 200),
        answer_format=settings.effective_atom_answer_format,
        check_yes=settings.effective_atom_check_yes if check_yes is None else check_yes,
        ask_decided=settings.effective_atom_ask_decided,
        model_kinds=settings.effective_atom_model_kinds,
    )


def build_atom_controller(
    services: Services, *, check_yes: bool | None = None, prompt: Prompt | None = None
) -> AtomQuestionController:
    """The atom-question controller on the configured LLM, without fallback (what `eval atoms`,
    `eval optimize-atoms` and the bench measure); `prompt` replaces the configured one.

    Raises:
        ConfigError: no LLM is configured.
    """
    if services.llm is None:
        raise ConfigError("atom questions need an LLM: set REASONING_LLM_PROVIDER")
    return _atom_controller(
        services.settings,
        services.llm,
        services.conditions,
        None,
        check_yes=check_yes,
        prompt=prompt,
    )


def conditions_controller(
    settings: Settings, *, executor: Executor | None = None
) -> ConditionsController:
    """The deterministic controller with the configured vocabulary; it decides in `executor`'s
    threads (asyncio's default pool when None)."""
    vocabulary = load_vocabulary(
        settings.vocabulary_path if settings.vocabulary_path.exists() else None
    )
    return ConditionsController(
        vocabulary, min_fact_confidence=settings.fact_min_confidence, executor=executor
    )


def build_controller(
    services: Services,
    name: str,
    *,
    prompt_id: str | None = None,
    prompt: Prompt | None = None,
    fallback: bool = True,
    llm: LLMClient | None = None,
    loop_only: bool = False,
) -> Controller:
    """A controller outside the rollout router, for offline runs (eval, bench, optimisation).

    `fallback=False` lets LLM failures show as `uncertain` instead of the heuristic's answer,
    which is what prompt optimisation must see; `llm` replaces the configured client;
    `loop_only` runs the ReAct loop even for criteria with conditions (the loop's prompt is what
    GEPA evolves, so the atom path must not answer for it).

    Raises:
        ConfigError: `react` was asked for but no LLM is configured.
    """
    heuristic = services.conditions
    if name == "heuristic":
        return heuristic
    llm = llm or services.llm
    if llm is None:
        raise ConfigError("the react controller needs an LLM: set REASONING_LLM_PROVIDER")
    settings = services.settings
    if prompt_id is not None:
        settings = settings.model_copy(update={"prompt_id": prompt_id})
    if loop_only:
        settings = settings.model_copy(update={"atom_questions": False})
    return _react_controller(
        settings, llm, services.retrieval, heuristic, prompt, fallback=fallback
    )


async def start_local_server(settings: Settings) -> LocalLlamaServer:
    """Start and supervise llama.cpp on 127.0.0.1 for `REASONING_LLM_PROVIDER=local`.

    Raises:
        ConfigError: the runtime or the model is not installed (`make setup-local`).
    """
    model = find_model(settings.models_dir, settings.local_model)
    if not is_runtime_installed() or model is None:
        raise ConfigError(
            f"REASONING_LLM_PROVIDER=local needs the llama.cpp runtime and {settings.local_model} "
            f"in {settings.models_dir}: run `make setup-local`, or set REASONING_LLM_BASE_URL "
            "to a server you run"
        )
    server = LocalLlamaServer(
        model, n_threads=settings.local_threads, model_alias=settings.local_model
    )
    return await server.start()


def _local_defaults(settings: Settings, server: LocalLlamaServer) -> dict[str, object]:
    """Point the OpenAI adapter at the local server. A CPU model answers one request at a time
    and slowly, so unless configured otherwise: one criterion at a time and a long timeout."""
    updates: dict[str, object] = {
        "llm_base_url": server.base_url,
        "llm_model": settings.local_model,
    }
    if "llm_timeout_s" not in settings.model_fields_set:
        updates["llm_timeout_s"] = 300.0
    if "criterion_concurrency" not in settings.model_fields_set:
        updates["criterion_concurrency"] = 1
    return updates
