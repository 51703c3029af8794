"""How names are found in text: the same in every process."""

from __future__ import annotations

import os
import subprocess
import sys

NAMES = ("alpha one", "bravo two", "charl six", "delta ten", "echo five", "foxt nine")
"""Aliases of one length, the ties a set's order would break differently per hash seed."""

PRINT_PATTERN = (
    "from reasoning_service.conditions.case_reading import _patterns; "
    f"print(_patterns({NAMES!r})[0].pattern)"
)


def _pattern_with_seed(seed: int) -> str:
    env = {**os.environ, "PYTHONHASHSEED": str(seed)}
    done = subprocess.run(
        [sys.executable, "-c", PRINT_PATTERN], env=env, capture_output=True, text=True, check=True
    )
    return done.stdout


def test_the_alternatives_of_a_names_pattern_do_not_depend_on_the_hash_seed():
    """The first alternative that matches names the mention in the evidence a reviewer reads."""
    assert len({_pattern_with_seed(seed) for seed in (1, 2, 3, 4)}) == 1
