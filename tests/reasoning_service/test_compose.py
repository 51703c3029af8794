"""docker-compose.yml describes the tested topology: PostgreSQL, two API replicas, two workers,
all on one REASONING_DATABASE_URL (no docker engine here: the processes test runs it instead,
tests/reasoning_service/scale/test_kill_a_worker.py)."""

from __future__ import annotations

import yaml

from testdata import REPO


def test_the_compose_file_runs_two_apis_and_two_workers_on_one_postgresql():
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    services = compose["services"]
    assert services["postgres"]["image"].startswith("postgres:15")
    commands = {name: s.get("command", [None])[0] for name, s in services.items()}
    assert sorted(n for n, c in commands.items() if c == "serve") == ["api-1", "api-2"]
    assert sorted(n for n, c in commands.items() if c == "worker") == ["worker-1", "worker-2"]
    for name in ("api-1", "api-2", "worker-1", "worker-2"):
        env = services[name]["environment"]
        assert env["REASONING_DATABASE_URL"].startswith("postgresql://")
        assert "@postgres:5432/" in env["REASONING_DATABASE_URL"]
        assert services[name]["depends_on"]["postgres"]["condition"] == "service_healthy"
