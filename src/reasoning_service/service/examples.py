"""The bundled example cases (`examples/cases/manifest.json`): which policy each is a request
under. `make run`, the quick benchmark and the load benchmark use them; naming them in data keeps
the code free of any one policy."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ExampleCase", "load_example_cases"]


class ExampleCase(BaseModel):
    """One bundled case and the policy it is a request under."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    file: str = Field(min_length=1)
    policy_id: str = Field(min_length=1)
    demo_criteria: list[str] = Field(default_factory=list)
    """Criteria a slow local model's demo evaluates (all of them otherwise)."""


class _Manifest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    about: str = ""
    cases: list[ExampleCase] = Field(min_length=1)


def load_example_cases(examples_dir: Path) -> list[ExampleCase]:
    """The manifest's cases, in order (the first is the demo case)."""
    path = examples_dir / "cases" / "manifest.json"
    return _Manifest.model_validate_json(path.read_bytes()).cases
