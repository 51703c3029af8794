"""The image has no eval, bench or local extra: the CLI and the app must start without them."""

from __future__ import annotations

import subprocess
import sys

_BLOCK_EXTRAS = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"gepa", "dspy", "litellm", "matplotlib", "llama_cpp"}:
            raise ImportError(f"{name} is an extra, not in the runtime image")
sys.meta_path.insert(0, Block())
import reasoning_service.cli, reasoning_service.api.app, reasoning_service.harness.commands
from reasoning_service.cli import main
main(["--help"])
"""


def test_the_cli_and_the_app_import_without_the_extras():
    run = subprocess.run(
        [sys.executable, "-c", _BLOCK_EXTRAS], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr[-2000:]
