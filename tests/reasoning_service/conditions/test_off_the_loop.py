"""The conditions controller decides in a worker thread, never on the event loop (issue 13)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from reasoning_service.conditions import ConditionsController
from reasoning_service.models.task import CriterionTask


async def test_each_criterion_is_decided_in_the_given_executor(vocabulary, cpap_case, cpap_policy):
    threads: list[str] = []
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="conditions") as executor:
        controller = ConditionsController(vocabulary, executor=executor)
        decide = controller.decide

        def spy(task: CriterionTask):
            threads.append(threading.current_thread().name)
            return decide(task)

        controller.decide = spy  # type: ignore[method-assign]
        assert cpap_policy.criteria is not None
        for criterion in cpap_policy.criteria.criteria[:3]:
            task = CriterionTask(case=cpap_case, policy=cpap_policy, criterion=criterion)
            await controller.evaluate(task)
    assert len(threads) == 3
    assert all(name.startswith("conditions") for name in threads), threads
    assert threading.main_thread().name not in threads


async def test_without_an_executor_it_still_leaves_the_event_loop(
    vocabulary, cpap_case, cpap_policy
):
    controller = ConditionsController(vocabulary)
    decide, threads = controller.decide, []

    def spy(task: CriterionTask):
        threads.append(threading.get_ident())
        return decide(task)

    controller.decide = spy  # type: ignore[method-assign]
    assert cpap_policy.criteria is not None
    criterion = cpap_policy.criteria.criteria[0]
    await controller.evaluate(
        CriterionTask(case=cpap_case, policy=cpap_policy, criterion=criterion)
    )
    assert threads and threads[0] != threading.get_ident()
