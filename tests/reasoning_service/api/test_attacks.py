"""Issue 13 as an attacker and a careless client would try it, over real HTTP against a real
SQLite file: no input stalls the service or gets a 5xx, no key rewrites a policy, keys can be
revoked, rotated and expire without a restart, every audited action leaves a row without case
data, retries with an `Idempotency-Key` never evaluate twice, and a provider key of any format
never comes back out. Every error has the service's JSON shape with the request id."""

from __future__ import annotations

import asyncio
import copy
import io
import json
import logging
import sqlite3
import threading
from pathlib import Path

import httpx
import pytest
from tests.reasoning_service.api.conftest import bearer, make_settings, new_key

from reasoning_service.api.app import create_app
from reasoning_service.api.errors import UnexpectedErrorMiddleware
from reasoning_service.logging_setup import RequestIdMiddleware, SecretMask, configure_logging
from reasoning_service.store import SqliteStore, open_store
from reasoning_service.store.keys import create_api_key
from reasoning_service.testing.live_server import LiveServer
from reasoning_service.testing.scripted_server import ScriptedServer, http_error
from testdata import EXAMPLES

CANARY = "CANARY-5d1c0b"
ONE_CRITERION = {"policy_id": "NCD-240.4", "criterion_ids": ["NCD-240.4/C1"]}
CPAP_MARKDOWN = (EXAMPLES / "policies" / "NCD-240.4.md").read_text()
CPAP_CRITERIA = json.loads((EXAMPLES / "criteria" / "NCD-240.4.json").read_text())


def assert_error(response: httpx.Response, status: int, error: str) -> dict:
    """The service's error shape: status, stable code, message, and the request id."""
    assert response.status_code == status, response.text
    body = response.json()
    assert body["error"] == error, body
    assert body["message"]
    assert body["request_id"] == response.headers["x-request-id"]
    return body


@pytest.fixture
def live(settings):
    with LiveServer(create_app(settings)) as server:
        yield server


@pytest.fixture
def http(live, admin_key):
    with httpx.Client(base_url=live.url, timeout=60, headers=bearer(admin_key)) as client:
        yield client


def evaluation_count(db: Path | str) -> int:
    """Evaluations stored in a SQLite file or the database a URL names."""

    async def count() -> int:
        store = open_store(db if isinstance(db, str) else f"sqlite:///{db}")
        try:
            return await store.run(lambda tables: tables.count("evaluations"))
        finally:
            await store.aclose()

    return asyncio.run(count())


# --- 1. bounded input -------------------------------------------------------------------------


def test_an_oversize_body_with_content_length_is_413_before_parsing(http, settings, cpap_case_json):
    body = json.dumps({"case": cpap_case_json, **ONE_CRITERION, "pad": "x" * 10_000_000})
    response = http.post(
        "/v1/evaluations", content=body, headers={"Content-Type": "application/json"}
    )
    message = assert_error(response, 413, "body_too_large")["message"]
    assert str(settings.max_body_bytes) in message
    assert evaluation_count(settings.db_path) == 0


def test_an_oversize_chunked_body_without_content_length_is_413(http, settings):
    def chunks():
        yield b'{"case": {"case_id": "'
        for _ in range(200):
            yield b"x" * 16_384  # 3.2 MB in all, no Content-Length
        yield b'"}}'

    response = http.post(
        "/v1/evaluations", content=chunks(), headers={"Content-Type": "application/json"}
    )
    assert "content-length" not in response.request.headers
    assert_error(response, 413, "body_too_large")
    assert http.get("/healthz").status_code == 200


def test_deeply_nested_json_is_400_not_500(http):
    response = http.post(
        "/v1/policies", content="[" * 200_000, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 400, response.text
    assert response.json()["request_id"] == response.headers["x-request-id"]


def test_a_huge_page_is_422_naming_the_field_and_limit_not_the_text(tmp_path, cpap_case_json):
    settings = make_settings(tmp_path / "db.sqlite", max_page_chars=1000)
    case = copy.deepcopy(cpap_case_json)
    case["documents"][0]["pages"].append(f"{CANARY} " + "y" * 2000)
    with LiveServer(create_app(settings)) as server:
        response = httpx.post(
            server.url + "/v1/evaluations",
            json={"case": case, **ONE_CRITERION},
            headers=bearer(new_key(settings.db_path)),
        )
    message = assert_error(response, 422, "invalid_request")["message"]
    last = len(case["documents"][0]["pages"]) - 1
    assert f"case.documents[0].pages[{last}]" in message and "1000" in message
    assert CANARY not in response.text


@pytest.mark.parametrize(
    ("limit", "field"),
    [
        ("max_facts", "case.facts"),
        ("max_documents", "case.documents"),
        ("max_pages_per_document", "case.documents[0].pages"),
        ("max_criterion_ids", "criterion_ids"),
    ],
)
def test_too_many_items_are_422_naming_the_field(tmp_path, cpap_case_json, limit, field):
    settings = make_settings(tmp_path / "db.sqlite", **{limit: 1})
    case = copy.deepcopy(cpap_case_json)
    case["facts"] = [*case["facts"], {"field": "x", "value": CANARY}, {"field": "y", "value": 1}]
    case["documents"][0]["pages"] = [f"{CANARY} one", "two"]
    case["documents"].append({"doc_id": f"{CANARY}-doc", "pages": ["three"]})
    body = {
        "case": case,
        "policy_id": "NCD-240.4",
        "criterion_ids": ["NCD-240.4/C1", "NCD-240.4/C2"],
    }
    with LiveServer(create_app(settings)) as server:
        response = httpx.post(
            server.url + "/v1/evaluations", json=body, headers=bearer(new_key(settings.db_path))
        )
    message = assert_error(response, 422, "invalid_request")["message"]
    assert message.startswith(f"{field}:") and f"REASONING_{limit.upper()}" in message
    assert CANARY not in response.text


def test_validation_errors_never_echo_case_values(http, cpap_case_json):
    case = copy.deepcopy(cpap_case_json)
    case["documents"].append({**case["documents"][0]})
    duplicate_id = case["documents"][0]["doc_id"]
    response = http.post("/v1/evaluations", json={"case": case, **ONE_CRITERION})
    body = assert_error(response, 422, "invalid_request")
    assert "doc_id" in body["message"] and f"'{duplicate_id}'" not in response.text
    unknown = http.post(
        "/v1/evaluations",
        json={"case": cpap_case_json, "policy_id": "NCD-240.4", "criterion_ids": [CANARY]},
    )
    assert "criterion_ids[0]" in assert_error(unknown, 422, "invalid_request")["message"]
    assert CANARY not in unknown.text


def pageindex(structure: list) -> dict:
    content = {"structure": structure}
    return {"policy_id": "TREE-1", "source_format": "pageindex", "content": content}


def nested(depth: int) -> list:
    node: dict = {"title": "leaf"}
    for level in range(depth - 1):
        node = {"title": f"level {level}", "nodes": [node]}
    return [node]


@pytest.mark.parametrize(
    ("structure", "says"),
    [
        ([{"title": f"n{i}"} for i in range(10_001)], "10000 sections"),
        ([{"title": f"n{i}"} for i in range(6_000)], "REASONING_MAX_POLICY_NODES"),
        (nested(300), "200 levels"),
        (nested(40), "REASONING_MAX_POLICY_DEPTH"),
    ],
    ids=["10001-nodes", "over-the-setting", "300-deep", "deeper-than-the-setting"],
)
def test_huge_or_deep_pageindex_trees_are_422(http, structure, says):
    response = http.post("/v1/policies", json=pageindex(structure))
    assert says in assert_error(response, 422, "invalid_policy_document")["message"]
    assert http.get("/v1/policies/TREE-1").status_code == 404


def test_markdown_with_12000_headings_is_422_not_a_stop_iteration(http):
    text = "".join(f"# Heading {i}\n\nbody {i}\n" for i in range(12_000))
    response = http.post(
        "/v1/policies", json={"policy_id": "MD-12K", "source_format": "markdown", "content": text}
    )
    assert "10000 sections" in assert_error(response, 422, "invalid_policy_document")["message"]


# --- 2. policies immutable and owned ----------------------------------------------------------


def cpap_upload(**changes: object) -> dict:
    return {
        "policy_id": "NCD-240.4",
        "version": "3",
        "source_format": "markdown",
        "content": CPAP_MARKDOWN,
        "criteria": CPAP_CRITERIA,
        **changes,
    }


def one_criterion_set() -> dict:
    criteria = copy.deepcopy(CPAP_CRITERIA)
    criteria["criteria"] = criteria["criteria"][:1]
    criteria["logic"] = criteria["criteria"][0]["criterion_id"]
    return criteria


def test_a_non_admin_key_cannot_upload_or_overwrite_a_policy(live, http, settings):
    before = http.get("/v1/policies/NCD-240.4").json()
    key = new_key(settings.db_path)
    response = httpx.post(
        live.url + "/v1/policies",
        json=cpap_upload(criteria=one_criterion_set()),
        headers=bearer(key),
    )
    assert "admin key" in assert_error(response, 403, "forbidden")["message"]
    assert http.get("/v1/policies/NCD-240.4").json() == before
    denied = [e for e in http.get("/v1/admin/audit").json() if e["action"] == "policy.create"]
    assert denied[0]["outcome"] == "denied" and denied[0]["resource"] == "NCD-240.4@3"


def test_a_stored_version_never_changes_even_for_an_admin(http):
    before = http.get("/v1/policies/NCD-240.4").json()
    other_text = http.post("/v1/policies", json=cpap_upload(content=CPAP_MARKDOWN + "\nMore.\n"))
    assert "new version" in assert_error(other_text, 409, "conflict")["message"]
    other_criteria = http.post("/v1/policies", json=cpap_upload(criteria=one_criterion_set()))
    assert "other criteria" in assert_error(other_criteria, 409, "conflict")["message"]
    same = http.post("/v1/policies", json=cpap_upload())
    assert same.status_code == 200 and same.json()["sha256"] == before["sha256"]
    assert http.get("/v1/policies/NCD-240.4").json() == before
    new_version = http.post("/v1/policies", json=cpap_upload(version="4", criteria=None))
    assert new_version.status_code == 201


def test_the_bundled_examples_never_overwrite_a_stored_version(tmp_path, caplog):
    db_path = tmp_path / "db.sqlite"
    first = make_settings(db_path, seed_examples=False)
    changed = CPAP_MARKDOWN.replace("CPAP", "CPAP (local edition)", 1)
    key = new_key(db_path, admin=True)
    with LiveServer(create_app(first)) as server:
        stored = httpx.post(
            server.url + "/v1/policies",
            json=cpap_upload(content=changed, criteria=None),
            headers=bearer(key),
        )
        assert stored.status_code == 201
    with caplog.at_level(logging.WARNING), LiveServer(create_app(make_settings(db_path))) as again:
        after = httpx.get(again.url + "/v1/policies/NCD-240.4", headers=bearer(key)).json()
    assert after["sha256"] == stored.json()["sha256"]
    assert any("keeping the stored one" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("policy_id", "../../etc/passwd"),
        ("policy_id", "a/b"),
        ("policy_id", ".."),
        ("policy_id", "a..b"),
        ("policy_id", "-leading-dash"),
        ("policy_id", "x" * 101),
        ("version", "../1"),
        ("version", "1 OR 1=1"),
    ],
)
def test_unsafe_policy_ids_and_versions_are_422(http, field, value):
    body = {"policy_id": "SAFE-1", "source_format": "markdown", "content": "# T\n\ntext\n"}
    response = http.post("/v1/policies", json={**body, field: value})
    assert assert_error(response, 422, "invalid_request")["message"].startswith(field)


# --- 3. keys and audit ------------------------------------------------------------------------


def test_revoked_rotated_and_expired_keys_are_refused_without_a_restart(live, http, settings):
    key = new_key(settings.db_path)
    key_id = key.split("_")[1]
    assert httpx.get(live.url + "/v1/policies", headers=bearer(key)).status_code == 200

    rotated = http.post(f"/v1/admin/api-keys/{key_id}/rotate")
    assert rotated.status_code == 200
    new = rotated.json()["api_key"]
    assert new != key and new.startswith(f"rsk_{key_id}_")
    old_try = httpx.get(live.url + "/v1/policies", headers=bearer(key))
    assert_error(old_try, 401, "unauthenticated")
    assert httpx.get(live.url + "/v1/policies", headers=bearer(new)).status_code == 200

    assert http.post(f"/v1/admin/api-keys/{key_id}/revoke").json()["live"] is False
    assert_error(httpx.get(live.url + "/v1/policies", headers=bearer(new)), 401, "unauthenticated")
    assert_error(http.post(f"/v1/admin/api-keys/{key_id}/rotate"), 409, "conflict")
    assert_error(http.post("/v1/admin/api-keys/nope/revoke"), 404, "not_found")

    async def expired() -> str:
        store = SqliteStore(settings.db_path)
        try:
            return (await create_api_key(store, expires_in_days=1e-9))[1]
        finally:
            await store.aclose()

    expired_key = asyncio.run(expired())
    assert_error(
        httpx.get(live.url + "/v1/policies", headers=bearer(expired_key)), 401, "unauthenticated"
    )
    listed = {k["key_id"]: k for k in http.get("/v1/admin/api-keys").json()}
    assert listed[key_id]["revoked_at"] and listed[key_id]["rotated_at"]
    assert not listed[expired_key.split("_")[1]]["live"]
    assert all("sha256" not in json.dumps(k) and "api_key" not in k for k in listed.values())


def test_admin_routes_need_an_admin_key(live, settings):
    key = new_key(settings.db_path)
    for method, path in [
        ("GET", "/v1/admin/api-keys"),
        ("POST", "/v1/admin/api-keys/x/revoke"),
        ("POST", "/v1/admin/api-keys/x/rotate"),
        ("GET", "/v1/admin/audit"),
    ]:
        response = httpx.request(method, live.url + path, headers=bearer(key))
        assert_error(response, 403, "forbidden")


def test_the_cli_lists_revokes_and_rotates_keys(settings, monkeypatch, capsys):
    from reasoning_service.cli import main

    monkeypatch.setenv("REASONING_DB_PATH", str(settings.db_path))
    monkeypatch.setenv("REASONING_SEED_EXAMPLES", "false")
    assert main(["api-key", "create", "--label", "ci", "--expires-in-days", "30"]) == 0
    key = capsys.readouterr().out.strip().splitlines()[-1]
    key_id = key.split("_")[1]
    assert main(["api-key", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed[0]["key_id"] == key_id and listed[0]["expires_at"] and listed[0]["live"]
    assert key not in json.dumps(listed)
    assert main(["api-key", "rotate", key_id]) == 0
    rotated = capsys.readouterr().out.strip().splitlines()[-1]
    assert rotated.startswith(f"rsk_{key_id}_") and rotated != key
    with LiveServer(create_app(settings)) as server:
        assert httpx.get(server.url + "/v1/policies", headers=bearer(key)).status_code == 401
        assert httpx.get(server.url + "/v1/policies", headers=bearer(rotated)).status_code == 200
        assert main(["api-key", "revoke", key_id]) == 0
        assert httpx.get(server.url + "/v1/policies", headers=bearer(rotated)).status_code == 401
    assert main(["api-key", "revoke", "unknown"]) == 2


def planted(case_json: dict) -> dict:
    case = copy.deepcopy(case_json)
    case["case_id"] = f"{CANARY}-case"
    case["facts"].append({"field": "note.canary", "value": f"{CANARY} Jane Roe"})
    case["documents"][0]["pages"][0] = f"Patient {CANARY}. " + case["documents"][0]["pages"][0]
    return case


def test_audited_actions_leave_rows_without_case_data(live, http, settings, cpap_case_json):
    reader = new_key(settings.db_path)
    created = http.post("/v1/evaluations", json={"case": planted(cpap_case_json), **ONE_CRITERION})
    evaluation_id = created.json()["evaluation_id"]
    http.get(f"/v1/evaluations/{evaluation_id}")
    http.get(f"/v1/evaluations/{evaluation_id}/trace")
    httpx.get(live.url + f"/v1/evaluations/{evaluation_id}", headers=bearer(reader))
    http.post("/v1/policies", json=cpap_upload(version="9", criteria=None))
    entries = http.get("/v1/admin/audit", params={"limit": 10}).json()
    seen = [(e["action"], e["resource"], e["outcome"], e["status_code"]) for e in entries]
    reader_id, admin_id = reader.split("_")[1], http.headers["authorization"].split("_")[1]
    assert seen == [
        ("policy.create", "NCD-240.4@9", "ok", 201),
        ("evaluation.read", evaluation_id, "denied", 403),
        ("evaluation.trace", evaluation_id, "ok", 200),
        ("evaluation.read", evaluation_id, "ok", 200),
        ("evaluation.create", evaluation_id, "ok", 201),
    ]
    assert [e["key_id"] for e in entries] == [admin_id, reader_id, admin_id, admin_id, admin_id]
    assert all(e["request_id"] and e["at"] for e in entries)
    rows = sqlite3.connect(settings.db_path).execute("select * from audit_log").fetchall()
    assert CANARY not in json.dumps(entries) + repr(rows)
    assert "rsk_" not in repr(rows)
    assert len(http.get("/v1/admin/audit", params={"limit": 2}).json()) == 2
    assert_error(http.get("/v1/admin/audit", params={"limit": 0}), 422, "invalid_request")


# --- 5. idempotency ---------------------------------------------------------------------------


def test_a_retry_with_the_same_idempotency_key_returns_the_first_evaluation(
    database_url, tmp_path, cpap_case_json
):
    settings = make_settings(tmp_path / "unused.db", database_url=database_url)
    alice, bob = new_key(settings.store_url), new_key(settings.store_url)
    body = {"case": cpap_case_json, **ONE_CRITERION}
    retry = {"Idempotency-Key": "order-42"}
    with LiveServer(create_app(settings)) as server:
        first = httpx.post(
            server.url + "/v1/evaluations", json=body, headers={**bearer(alice), **retry}
        )
        again = httpx.post(
            server.url + "/v1/evaluations", json=body, headers={**bearer(alice), **retry}
        )
        other_body = httpx.post(
            server.url + "/v1/evaluations",
            json={**body, "criterion_ids": ["NCD-240.4/C2"]},
            headers={**bearer(alice), **retry},
        )
        other_key = httpx.post(
            server.url + "/v1/evaluations", json=body, headers={**bearer(bob), **retry}
        )
        bad_header = httpx.post(
            server.url + "/v1/evaluations",
            json=body,
            headers={**bearer(alice), "Idempotency-Key": "has a space"},
        )
    assert first.status_code == 201 and "idempotent-replayed" not in first.headers
    assert again.status_code == 200 and again.headers["idempotent-replayed"] == "true"
    assert again.json() == first.json()
    assert "different request body" in assert_error(other_body, 422, "invalid_request")["message"]
    assert other_key.status_code == 201
    assert other_key.json()["evaluation_id"] != first.json()["evaluation_id"]
    assert "Idempotency-Key" in assert_error(bad_header, 422, "invalid_request")["message"]
    assert evaluation_count(settings.store_url) == 2

    with LiveServer(create_app(settings)) as restarted:  # the key survives a restart
        after = httpx.post(
            restarted.url + "/v1/evaluations", json=body, headers={**bearer(alice), **retry}
        )
    assert after.status_code == 200
    assert after.json()["evaluation_id"] == first.json()["evaluation_id"]
    assert evaluation_count(settings.store_url) == 2


def test_simultaneous_requests_with_one_idempotency_key_yield_one_evaluation(
    live, settings, admin_key, cpap_case_json
):
    body = {"case": cpap_case_json, **ONE_CRITERION}
    headers = {**bearer(admin_key), "Idempotency-Key": "same-for-all"}
    replies: list[httpx.Response] = []
    start = threading.Barrier(6)

    def send() -> None:
        start.wait()
        replies.append(httpx.post(live.url + "/v1/evaluations", json=body, headers=headers))

    threads = [threading.Thread(target=send) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(r.status_code for r in replies) == [200] * 5 + [201]
    assert len({r.json()["evaluation_id"] for r in replies}) == 1
    assert evaluation_count(settings.db_path) == 1


# --- the provider's key, whatever its format, never comes back out ----------------------------

CUSTOM_KEY = "acme-live-Zq8RkT3vW1xY5uP0"


def test_a_custom_format_provider_key_is_masked_in_replies_store_and_logs(tmp_path, cpap_case_json):
    db_path = tmp_path / "db.sqlite"
    echo = http_error(401, message=f"Incorrect API key provided: {CUSTOM_KEY}.")
    with ScriptedServer([echo] * 8) as provider:
        settings = make_settings(
            db_path,
            controller="react",
            llm_provider="openai",
            llm_model="test-model",
            llm_base_url=provider.base_url,
            llm_api_key=CUSTOM_KEY,
            llm_timeout_s=2,
            atom_questions=False,
            tree_search="lexical",
            retry_base_s=0.01,
            llm_fallback="uncertain",
            auth="off",
        )
        log = io.StringIO()
        with LiveServer(create_app(settings)) as server:
            configure_logging("DEBUG", stream=log, mask=SecretMask(settings.secret_values()))
            created = httpx.post(
                server.url + "/v1/evaluations",
                json={"case": cpap_case_json, **ONE_CRITERION},
                timeout=60,
            )
            trace = httpx.get(
                server.url + f"/v1/evaluations/{created.json()['evaluation_id']}/trace"
            )
            logging.getLogger("reasoning_service.test").error(f"provider said {CUSTOM_KEY}")
    assert created.status_code == 201, created.text
    interactions = [i for c in trace.json()["criteria"] for i in c["interactions"]]
    assert interactions and all(not i["success"] for i in interactions)
    assert any("Incorrect API key provided: ***" in i["error_message"] for i in interactions)
    stored = db_path.read_bytes().decode("latin-1")
    wal = Path(f"{db_path}-wal")
    stored += wal.read_bytes().decode("latin-1") if wal.exists() else ""
    for text in (created.text, trace.text, stored, log.getvalue()):
        assert CUSTOM_KEY not in text
    assert "provider said ***" in log.getvalue()


# --- 4. clean logs and errors -----------------------------------------------------------------


def test_one_handler_and_exceptions_by_type_and_place_only():
    root = logging.getLogger()
    logging.basicConfig()  # what the CLI used to do: a second root handler
    log = io.StringIO()
    handler = configure_logging("INFO", stream=log)
    try:
        plain = [h for h in root.handlers if type(h) is logging.StreamHandler]
        assert plain == [handler]
        try:
            raise ValueError(f"case value {CANARY}")
        except ValueError as exc:
            logging.getLogger("reasoning_service.test").error("failed", exc_info=exc)
        lines = log.getvalue().splitlines()
        assert len(lines) == 1
        entry = json.loads(lines[0])
        assert entry["exc_type"] == "ValueError"
        assert entry["exc_where"].startswith("test_attacks.py:")
        assert CANARY not in lines[0] and "Traceback" not in lines[0]
    finally:
        root.removeHandler(handler)


async def test_an_unexpected_error_is_a_json_500_with_the_request_id_and_no_text():
    async def broken(scope, receive, send):
        raise RuntimeError(f"secret detail {CANARY}")

    app = RequestIdMiddleware(UnexpectedErrorMiddleware(broken))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        response = await client.get("/anything", headers={"X-Request-ID": "req-1"})
    body = assert_error(response, 500, "internal_error")
    assert body["request_id"] == "req-1" and CANARY not in response.text
    assert "RuntimeError" not in response.text
