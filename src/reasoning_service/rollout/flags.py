"""Rollout flags that change without a restart: a small JSON file re-read when its mtime changes.

`REASONING_FLAGS_FILE=/etc/reasoning/flags.json` holding `{"controller": "ab:20"}` routes 20 % of
cases to the candidate from the next request on; `{"candidate_prompt_id": "react-v2"}` makes that
prompt version the candidate of `shadow` and `ab:<percent>` (a prompt comparison against the
configured prompt). Keys left out fall back to the settings; a file that is missing or invalid
keeps the last good flags (and logs why once), and an unknown prompt id keeps the last good
candidate (with a warning), so a bad edit never takes the service down.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from reasoning_service.errors import ConfigError
from reasoning_service.settings import check_controller_mode

__all__ = ["FlagSource", "RolloutFlags"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RolloutFlags:
    """The routing mode in force, and the candidate prompt of a prompt comparison."""

    controller: str
    candidate_prompt_id: str | None = None
    """Prompt version the candidate arm runs; None: the candidate is react against heuristic."""

    @property
    def ab_percent(self) -> float | None:
        """The candidate's share in `ab:<percent>` mode, else None."""
        return float(self.controller[3:]) if self.controller.startswith("ab:") else None


class FlagSource:
    """Current flags: the defaults, overridden by the flags file when there is one.

    `current()` stats the file (cheap) and re-reads it only when its mtime or size changed.
    """

    def __init__(
        self,
        defaults: RolloutFlags,
        path: Path | None = None,
        *,
        check_prompt: Callable[[str], object] | None = None,
    ) -> None:
        """`check_prompt(prompt_id)` raises `ConfigError` for a prompt that cannot be loaded."""
        self._defaults = defaults
        self._check_prompt = check_prompt
        self._path = path
        self._flags = defaults
        self._seen: tuple[float, int] | None = None
        self._lock = threading.Lock()

    @property
    def path(self) -> Path | None:
        return self._path

    def current(self) -> RolloutFlags:
        if self._path is None:
            return self._flags
        try:
            stat = os.stat(self._path)
        except OSError:
            return self._forget_file()
        signature = (stat.st_mtime, stat.st_size)
        with self._lock:
            if signature != self._seen:
                self._seen = signature
                self._flags = self._read(self._flags)
            return self._flags

    def _forget_file(self) -> RolloutFlags:
        with self._lock:
            if self._seen is not None:
                logger.warning("flags file is gone; using the settings", extra={"flags": "reset"})
                self._seen = None
                self._flags = self._defaults
            return self._flags

    def _read(self, last_good: RolloutFlags) -> RolloutFlags:
        assert self._path is not None
        try:
            raw = json.loads(self._path.read_text(encoding="utf-8"))
            if not isinstance(raw, dict):
                raise ConfigError("the flags file must hold a JSON object")
            flags = self._defaults
            if "controller" in raw:
                flags = replace(flags, controller=check_controller_mode(raw["controller"]))
        except (OSError, ValueError, ConfigError) as exc:
            logger.warning(
                "flags file ignored; keeping the last good flags",
                extra={"error_type": type(exc).__name__, "controller": last_good.controller},
            )
            return last_good
        if "candidate_prompt_id" in raw:
            candidate = self._candidate_prompt(raw["candidate_prompt_id"], last_good)
            flags = replace(flags, candidate_prompt_id=candidate)
        if flags != last_good:
            logger.info(
                "rollout flags changed",
                extra={
                    "controller": flags.controller,
                    "flags": f"candidate_prompt_id={flags.candidate_prompt_id}",
                },
            )
        return flags

    def _candidate_prompt(self, value: object, last_good: RolloutFlags) -> str | None:
        """The flags file's candidate prompt id if it loads, else the last good one."""
        if value is None:
            return None
        try:
            if not isinstance(value, str) or not value.strip():
                raise ConfigError("candidate_prompt_id must be a prompt id")
            if self._check_prompt is not None:
                self._check_prompt(value.strip())
        except ConfigError as exc:
            logger.warning(
                "candidate prompt rejected; keeping the last good candidate",
                extra={
                    "error_type": type(exc).__name__,
                    "flags": f"candidate_prompt_id={last_good.candidate_prompt_id}",
                },
            )
            return last_good.candidate_prompt_id
        return value.strip()
