"""Versioned prompts: `prompts/<prompt_id>.md` is the system prompt; an optional
`prompts/<prompt_id>.tools.json` overrides tool descriptions (GEPA writes both)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from reasoning_service.errors import ConfigError

_PROMPT_ID = re.compile(r"^[A-Za-z0-9._-]+$")


@dataclass(frozen=True)
class Prompt:
    """A system prompt and tool descriptions, identified by the id every result carries."""

    prompt_id: str
    system: str
    tool_descriptions: dict[str, str] = field(default_factory=dict)


def load_prompt(prompts_dir: Path, prompt_id: str) -> Prompt:
    """Read a prompt version; a missing one is a deployment error, not a fallback."""
    if not _PROMPT_ID.match(prompt_id):
        raise ConfigError(f"prompt id {prompt_id!r} has characters a file name cannot")
    path = prompts_dir / f"{prompt_id}.md"
    if not path.exists():
        raise ConfigError(f"prompt {prompt_id!r} not found at {path}")
    tools_path = prompts_dir / f"{prompt_id}.tools.json"
    descriptions = json.loads(tools_path.read_text()) if tools_path.exists() else {}
    return Prompt(prompt_id, path.read_text(encoding="utf-8").strip(), descriptions)


def write_prompt(prompts_dir: Path, prompt: Prompt, *, metadata: dict[str, object]) -> Path:
    """Write a new prompt version (refusing to overwrite one) with its scores and lineage."""
    path = prompts_dir / f"{prompt.prompt_id}.md"
    if path.exists():
        raise ConfigError(f"prompt {prompt.prompt_id!r} exists; versions are never overwritten")
    prompts_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(prompt.system.strip() + "\n", encoding="utf-8")
    if prompt.tool_descriptions:
        (prompts_dir / f"{prompt.prompt_id}.tools.json").write_text(
            json.dumps(prompt.tool_descriptions, indent=2) + "\n"
        )
    (prompts_dir / f"{prompt.prompt_id}.meta.json").write_text(
        json.dumps(metadata, indent=2, default=str) + "\n"
    )
    return path
