"""API keys: required on /v1 by default, hashed in storage, owners read only their evaluations."""

from __future__ import annotations

import logging
import sqlite3

import httpx
import pytest
from tests.reasoning_service.api.conftest import bearer, make_settings, new_key

from reasoning_service.api.app import create_app
from reasoning_service.testing.live_server import LiveServer

ONE_CRITERION = {"policy_id": "NCD-240.4", "criterion_ids": ["NCD-240.4/C1"]}


@pytest.fixture
def server(settings):
    with LiveServer(create_app(settings)) as live:
        yield live


def test_v1_routes_need_a_key(server):
    for method, path in [
        ("GET", "/v1/policies"),
        ("GET", "/v1/policies/NCD-240.4"),
        ("POST", "/v1/policies"),
        ("POST", "/v1/evaluations"),
        ("GET", "/v1/evaluations/x"),
        ("GET", "/v1/evaluations/x/trace"),
        ("GET", "/v1/shadow/report"),
    ]:
        response = httpx.request(method, server.url + path, json={})
        assert response.status_code == 401, (method, path, response.text)
        assert response.json()["error"] == "unauthenticated"
        assert "Authorization: Bearer" in response.json()["message"]
        assert response.headers["www-authenticate"] == "Bearer"


def test_an_unknown_or_malformed_key_is_401(server):
    for header in ["Bearer rsk_nope_nope", "Basic dXNlcjpwYXNz", "Bearer", "rsk_x"]:
        response = httpx.get(server.url + "/v1/policies", headers={"Authorization": header})
        assert response.status_code == 401, header


def test_health_readiness_and_metrics_stay_open(server):
    for path in ["/healthz", "/readyz", "/metrics"]:
        assert httpx.get(server.url + path).status_code == 200, path


def test_metrics_can_require_a_key(tmp_path):
    settings = make_settings(tmp_path / "m.db", metrics_auth=True)
    key = new_key(settings.db_path)
    with LiveServer(create_app(settings)) as live:
        assert httpx.get(live.url + "/metrics").status_code == 401
        assert httpx.get(live.url + "/metrics", headers=bearer(key)).status_code == 200
        assert httpx.get(live.url + "/healthz").status_code == 200


def test_a_key_reads_only_its_own_evaluations_unless_admin(database_url, tmp_path, cpap_case_json):
    settings = make_settings(tmp_path / "unused.db", database_url=database_url)
    alice, bob = new_key(settings.store_url), new_key(settings.store_url)
    admin = new_key(settings.store_url, admin=True)
    with LiveServer(create_app(settings)) as live:
        created = httpx.post(
            live.url + "/v1/evaluations",
            json={"case": cpap_case_json, **ONE_CRITERION},
            headers=bearer(alice),
            timeout=60,
        )
        assert created.status_code == 201
        path = f"/v1/evaluations/{created.json()['evaluation_id']}"
        for suffix in ("", "/trace"):
            assert httpx.get(live.url + path + suffix, headers=bearer(alice)).status_code == 200
            assert httpx.get(live.url + path + suffix, headers=bearer(admin)).status_code == 200
            denied = httpx.get(live.url + path + suffix, headers=bearer(bob))
            assert denied.status_code == 403
            assert denied.json()["error"] == "forbidden"
            assert "another API key" in denied.json()["message"]
        assert httpx.get(live.url + "/v1/policies", headers=bearer(bob)).status_code == 200
        report = httpx.get(live.url + "/v1/shadow/report", headers=bearer(bob))
        assert report.status_code == 403 and "admin" in report.json()["message"]
        assert httpx.get(live.url + "/v1/shadow/report", headers=bearer(admin)).status_code == 200
        audit = httpx.get(live.url + "/v1/admin/audit", headers=bearer(admin)).json()
        assert {"evaluation.create", "evaluation.read", "evaluation.trace"} <= {
            entry["action"] for entry in audit
        }


def test_only_the_hash_of_a_key_is_stored(settings):
    key = new_key(settings.db_path)
    stored = sqlite3.connect(settings.db_path).execute("select key_sha256 from api_keys").fetchall()
    assert (
        len(stored) == 1
        and stored[0][0] != key
        and key not in settings.db_path.read_bytes().decode("latin-1")
    )


def test_auth_off_lets_everyone_in_and_warns_at_start_up(tmp_path, caplog, cpap_case_json):
    settings = make_settings(tmp_path / "off.db", auth="off")
    with caplog.at_level(logging.WARNING), LiveServer(create_app(settings)) as live:
        assert httpx.get(live.url + "/v1/policies").status_code == 200
        created = httpx.post(
            live.url + "/v1/evaluations",
            json={"case": cpap_case_json, **ONE_CRITERION},
            timeout=60,
        )
        assert created.status_code == 201
    assert any("authentication is OFF" in r.getMessage() for r in caplog.records)


def test_cli_creates_a_key_that_the_api_accepts(settings, monkeypatch, capsys):
    from reasoning_service.cli import main

    monkeypatch.setenv("REASONING_DB_PATH", str(settings.db_path))
    assert main(["api-key", "create", "--admin"]) == 0
    key = capsys.readouterr().out.strip().splitlines()[-1]
    assert key.startswith("rsk_")
    with LiveServer(create_app(settings)) as live:
        response = httpx.get(live.url + "/v1/shadow/report", headers=bearer(key))
        assert response.status_code == 200
        assert response.headers["x-request-id"]
