"""Which controller serves a case: the rollout flag `REASONING_CONTROLLER`.

`heuristic` and `react` serve every case with one controller; `shadow` serves the control and
runs the candidate in the background (`rollout/shadow.py`); `ab:<percent>` sends that share of
cases, by a salted hash of the case id, to the candidate. Control/candidate are heuristic/react,
or two prompt versions of react when a candidate prompt is set (`REASONING_CANDIDATE_PROMPT_ID`,
or `candidate_prompt_id` in the flags file). The flags file (`rollout/flags.py`) changes the mode
and the candidate prompt without a restart; `candidate_for` builds (once per prompt id) the
ReAct controller of a candidate prompt named there.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from dataclasses import dataclass

from reasoning_service.errors import ConfigError
from reasoning_service.models.task import Controller
from reasoning_service.rollout.flags import FlagSource


@dataclass(frozen=True)
class Route:
    """The controller that serves a case, the rollout arm it belongs to, and a shadow if any."""

    controller: Controller
    arm: str | None = None
    shadow: Controller | None = None


def bucket(case_id: str, salt: str) -> float:
    """A stable number in [0, 100) for a case id: the same case always lands in the same arm."""
    digest = hashlib.sha256(f"{salt}:{case_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 * 100


class Router:
    """Chooses a route per case from the controller flag."""

    def __init__(
        self,
        mode: str,
        *,
        heuristic: Controller,
        react: Controller | None,
        salt: str = "reasoning-ab-v1",
        candidate: Controller | None = None,
        flags: FlagSource | None = None,
        candidate_for: Callable[[str], Controller] | None = None,
    ) -> None:
        """`candidate` (a ReAct controller on another prompt) turns `shadow` and `ab` into a
        prompt comparison: control is `react`, candidate is `candidate`. `flags` overrides `mode`
        at run time (a flags file re-read on change), and its `candidate_prompt_id`, when set,
        overrides `candidate` with `candidate_for(prompt_id)` (built once per id)."""
        if mode != "heuristic" and react is None:
            raise ConfigError(
                f"REASONING_CONTROLLER={mode} needs an LLM: set REASONING_LLM_PROVIDER"
            )
        self._mode = mode
        self._heuristic = heuristic
        self._react = react
        self._salt = salt
        self._candidate = candidate
        self._flags = flags
        self._candidate_for = candidate_for
        self._candidates: dict[str, Controller] = {}
        self._lock = threading.Lock()

    @property
    def mode(self) -> str:
        """The routing mode in force: the flags file's when there is one, else the setting."""
        return self._flags.current().controller if self._flags is not None else self._mode

    def candidate(self, prompt_id: str | None) -> Controller | None:
        """The candidate prompt's controller (cached), else the fixed `candidate`."""
        if prompt_id is None or self._candidate_for is None:
            return self._candidate
        with self._lock:
            if prompt_id not in self._candidates:
                self._candidates[prompt_id] = self._candidate_for(prompt_id)
            return self._candidates[prompt_id]

    def route(self, case_id: str) -> Route:
        flags = self._flags.current() if self._flags is not None else None
        mode = flags.controller if flags is not None else self._mode
        if mode == "heuristic" or self._react is None:
            return Route(self._heuristic)
        if mode == "react":
            return Route(self._react)
        prompted = self.candidate(flags.candidate_prompt_id if flags is not None else None)
        control, candidate = (
            (self._react, prompted) if prompted is not None else (self._heuristic, self._react)
        )
        if mode == "shadow":
            return Route(control, arm="control", shadow=candidate)
        percent = float(mode.removeprefix("ab:"))
        if bucket(case_id, self._salt) < percent:
            return Route(candidate, arm="candidate")
        return Route(control, arm="control")
