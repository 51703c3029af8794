"""A canary planted in a case (id, patient, facts, documents) and an API key: it must show up in
no log line (JSON logs, as deployed) and no metric, whatever path the request takes —
heuristic, react over a flaky provider, shadow, validation errors and auth failures — even
with REASONING_LOG_LEVEL=DEBUG."""

from __future__ import annotations

import copy
import io
import logging

import httpx
from tests.reasoning_service.api.conftest import bearer, new_key
from tests.reasoning_service.api.test_load_and_faults import FlakyProvider, react_settings

from reasoning_service.api.app import create_app
from reasoning_service.logging_setup import JsonFormatter
from reasoning_service.testing.live_server import LiveServer
from reasoning_service.testing.scripted_server import ScriptedServer

CANARY = "CANARY-7f3a9e"


def planted(case_json: dict) -> dict:
    case = copy.deepcopy(case_json)
    case["case_id"] = f"{CANARY}-case"
    case["patient"]["sex"] = f"{CANARY}-sex"
    case["facts"].append({"field": "note.canary", "value": f"{CANARY} Jane Roe DOB 1961-02-03"})
    case["documents"][0]["pages"][0] = (
        f"Patient {CANARY} Jane Roe. " + (case["documents"][0]["pages"][0])
    )
    return case


class Capture:
    """Every record of the root, uvicorn and access loggers, formatted as deployed."""

    def __init__(self, *, test_client_url: str) -> None:
        self.stream = io.StringIO()
        self.handler = logging.StreamHandler(self.stream)
        self.handler.setFormatter(JsonFormatter())
        self.handler.setLevel(logging.DEBUG)
        # The test's own HTTP client logs the URLs it calls; the service's log is under test.
        self.handler.addFilter(
            lambda r: not (r.name == "httpx" and test_client_url in r.getMessage())
        )
        self.loggers = [logging.getLogger(n) for n in ("", "uvicorn", "uvicorn.error")]

    def __enter__(self) -> Capture:
        for logger in self.loggers:
            logger.addHandler(self.handler)
        return self

    def __exit__(self, *exc: object) -> None:
        for logger in self.loggers:
            logger.removeHandler(self.handler)

    @property
    def text(self) -> str:
        return self.stream.getvalue()


def exercise(url: str, key: str, case: dict) -> None:
    body = {"case": case, "policy_id": "NCD-240.4", "criterion_ids": ["NCD-240.4/C1"]}
    with httpx.Client(base_url=url, timeout=60) as http:
        created = http.post("/v1/evaluations", json=body, headers=bearer(key))
        assert created.status_code == 201, created.text
        evaluation_id = created.json()["evaluation_id"]
        assert (
            http.get(f"/v1/evaluations/{evaluation_id}/trace", headers=bearer(key)).status_code
            == 200
        )
        bad = copy.deepcopy(case)
        bad["patient"]["age"] = f"{CANARY}-age"
        assert (
            http.post(
                "/v1/evaluations", json={**body, "case": bad}, headers=bearer(key)
            ).status_code
            == 422
        )
        broken = f'{{"case": {{"case_id": "{CANARY}"'.encode()
        assert (
            http.post(
                "/v1/evaluations",
                content=broken,
                headers={**bearer(key), "content-type": "application/json"},
            ).status_code
            == 400
        )
        assert http.get("/v1/policies", headers=bearer(f"rsk_{CANARY}_wrong")).status_code == 401
        assert (
            http.get("/v1/policies", headers={"Authorization": f"Basic {CANARY}"}).status_code
            == 401
        )
        assert http.get(f"/v1/evaluations/{CANARY}", headers=bearer(key)).status_code == 404
        assert (
            http.get(
                "/v1/policies", headers={**bearer(key), "X-Request-ID": f"{CANARY} x"}
            ).status_code
            == 200
        )
        http.get("/v1/shadow/report", headers=bearer(key))
        metrics = http.get("/metrics").text
    assert CANARY not in metrics and key not in metrics


def test_the_canary_is_in_no_log_line_and_no_metric(tmp_path, cpap_case_json):
    case = planted(cpap_case_json)
    with ScriptedServer(responder=FlakyProvider(failure_rate=0.3)) as llm_server:
        for controller in ("heuristic", "react", "shadow"):
            db = tmp_path / f"{controller}.db"
            key = new_key(db, admin=True)
            settings = react_settings(
                db, llm_server.base_url, controller=controller, log_level="DEBUG"
            )
            with (
                LiveServer(create_app(settings)) as service,
                Capture(test_client_url=service.url) as logs,
            ):
                exercise(service.url, key, case)
            assert logs.text.count("\n") > 5, "the capture saw nothing"
            assert CANARY not in logs.text, [x for x in logs.text.splitlines() if CANARY in x][:3]
            assert key not in logs.text and key.split("_", 2)[2] not in logs.text
            assert "sk-test-not-a-real-key" not in logs.text
            assert '"request_id"' in logs.text
