"""Builds the service graph once (CLI or app lifespan) and closes it: nothing is a global."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from reasoning_service.services.evaluation import EvaluationService
from reasoning_service.services.heuristic import HeuristicController
from reasoning_service.services.policies import PolicyService
from reasoning_service.services.routing import Router
from reasoning_service.settings import Settings
from reasoning_service.store import SqliteStore, Store
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

    async def aclose(self) -> None:
        await self.retrieval.aclose()
        await self.store.aclose()


async def build_services(settings: Settings, *, store: Store | None = None) -> Services:
    """Open the store, rebuild the search index, seed the examples, wire the controllers."""
    store = store or SqliteStore(settings.db_path)
    retrieval = RetrievalService()
    policies = PolicyService(store, retrieval)
    indexed = await policies.index_stored()
    if settings.seed_examples and settings.examples_dir.exists():
        await policies.seed_from_folder(settings.examples_dir)
    heuristic = HeuristicController(retrieval)
    router = Router(settings.controller, heuristic=heuristic, react=None)
    evaluations = EvaluationService(
        store=store,
        policies=policies,
        router=router,
        criterion_concurrency=settings.criterion_concurrency,
    )
    logger.info("services ready", extra={"policies_indexed": indexed})
    return Services(
        settings=settings,
        store=store,
        retrieval=retrieval,
        policies=policies,
        router=router,
        evaluations=evaluations,
    )
