"""Which controller serves a case: the rollout flag `REASONING_CONTROLLER`.

`heuristic` and `react` serve every case with one controller. (`shadow` and `ab:<percent>`
are parsed by Settings; see `Router.route`.)
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from reasoning_service.errors import ConfigError
from reasoning_service.services.controller import Controller


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
    ) -> None:
        if mode != "heuristic" and react is None:
            raise ConfigError(
                f"REASONING_CONTROLLER={mode} needs an LLM: set REASONING_LLM_PROVIDER"
            )
        self.mode = mode
        self._heuristic = heuristic
        self._react = react
        self._salt = salt

    def route(self, case_id: str) -> Route:
        if self.mode == "heuristic" or self._react is None:
            return Route(self._heuristic)
        if self.mode == "react":
            return Route(self._react)
        if self.mode == "shadow":
            return Route(self._heuristic, arm="control", shadow=self._react)
        percent = float(self.mode.removeprefix("ab:"))
        if bucket(case_id, self._salt) < percent:
            return Route(self._react, arm="candidate")
        return Route(self._heuristic, arm="control")
