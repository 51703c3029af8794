"""Routing flags: deterministic A/B buckets, the split, and flag changes without a restart."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

import pytest

from reasoning_service.errors import ConfigError
from reasoning_service.rollout.flags import FlagSource, RolloutFlags
from reasoning_service.rollout.routing import Router, bucket
from reasoning_service.settings import check_controller_mode


@dataclass
class Named:
    name: str

    async def evaluate(self, task):  # pragma: no cover - routing never calls it
        raise AssertionError


CONTROL, CANDIDATE = Named("heuristic"), Named("react")
CASE_IDS = [f"case-{i:05d}" for i in range(10_000)]


@pytest.mark.parametrize("percent", [5, 20, 50, 80])
def test_ab_split_is_within_three_points_of_the_target_over_10000_cases(percent):
    router = Router(f"ab:{percent}", heuristic=CONTROL, react=CANDIDATE)
    routes = [router.route(case_id) for case_id in CASE_IDS]
    candidates = sum(1 for r in routes if r.arm == "candidate")
    assert abs(candidates / len(CASE_IDS) * 100 - percent) <= 3
    assert all((r.arm == "candidate") == (r.controller is CANDIDATE) for r in routes), (
        "the arm names the controller that serves"
    )
    assert all(r.shadow is None for r in routes)


def test_the_same_case_always_lands_in_the_same_arm():
    first = Router("ab:30", heuristic=CONTROL, react=CANDIDATE)
    second = Router("ab:30", heuristic=Named("heuristic"), react=Named("react"))
    for case_id in CASE_IDS[:500]:
        arms = {first.route(case_id).arm for _ in range(3)} | {second.route(case_id).arm}
        assert len(arms) == 1


def test_the_salt_reshuffles_the_arms_and_the_bucket_is_in_range():
    same = sum((bucket(c, "salt-a") < 50) == (bucket(c, "salt-b") < 50) for c in CASE_IDS[:2000])
    assert 800 < same < 1200
    assert all(0 <= bucket(c, "s") < 100 for c in CASE_IDS[:2000])


def test_ab_0_and_100_are_all_control_and_all_candidate():
    assert {
        Router("ab:0", heuristic=CONTROL, react=CANDIDATE).route(c).arm for c in CASE_IDS[:300]
    } == {"control"}
    assert {
        Router("ab:100", heuristic=CONTROL, react=CANDIDATE).route(c).arm for c in CASE_IDS[:300]
    } == {"candidate"}


def test_shadow_serves_the_control_and_shadows_the_candidate():
    route = Router("shadow", heuristic=CONTROL, react=CANDIDATE).route("c1")
    assert route.controller is CONTROL and route.shadow is CANDIDATE and route.arm == "control"


def test_a_candidate_prompt_makes_the_split_a_prompt_comparison():
    control_prompt, candidate_prompt = Named("react"), Named("react")
    router = Router("ab:50", heuristic=CONTROL, react=control_prompt, candidate=candidate_prompt)
    served = {id(router.route(c).controller) for c in CASE_IDS[:200]}
    assert served == {id(control_prompt), id(candidate_prompt)}
    shadow = Router("shadow", heuristic=CONTROL, react=control_prompt, candidate=candidate_prompt)
    assert shadow.route("c").controller is control_prompt
    assert shadow.route("c").shadow is candidate_prompt


def test_a_flag_file_change_takes_effect_without_a_restart(tmp_path):
    path = tmp_path / "flags.json"
    flags = FlagSource(RolloutFlags("heuristic"), path)
    router = Router("heuristic", heuristic=CONTROL, react=CANDIDATE, flags=flags)
    assert router.mode == "heuristic" and router.route("c1").controller is CONTROL

    _write(path, {"controller": "react"})
    assert router.mode == "react" and router.route("c1").controller is CANDIDATE

    _write(path, {"controller": "ab:100"})
    assert router.route("c1").arm == "candidate"

    _write(path, {"controller": "sometimes"})  # invalid: the last good flags stay
    assert router.mode == "ab:100"

    path.unlink()  # gone: back to the setting
    assert router.mode == "heuristic"


def test_flag_file_with_bad_json_is_ignored(tmp_path):
    path = tmp_path / "flags.json"
    path.write_text("{not json")
    assert FlagSource(RolloutFlags("shadow"), path).current().controller == "shadow"


@pytest.mark.parametrize("mode", ["heuristic", "REACT", " shadow ", "ab:0", "ab:12.5", "ab:100"])
def test_valid_modes(mode):
    assert check_controller_mode(mode) == mode.strip().lower()


@pytest.mark.parametrize("mode", ["", "ab:", "ab:101", "ab:-1", "ab:x", "canary"])
def test_invalid_modes(mode):
    with pytest.raises(ConfigError):
        check_controller_mode(mode)


_generation = 0


def _write(path, flags: dict) -> None:
    """Write and move the mtime forward (file systems with coarse mtimes see every change)."""
    global _generation
    _generation += 1
    path.write_text(json.dumps(flags))
    stat = path.stat()
    os.utime(path, (stat.st_atime, stat.st_mtime + _generation))
