"""The reviewer's page (`GET /review/{id}`): auth by key or signed link, open criteria first,
evidence marked in its document page, and how it looks in headless Chromium (a screenshot)."""

from __future__ import annotations

import json
import shutil

import httpx
import pytest
from tests.reasoning_service.api.conftest import bearer, new_key

from reasoning_service.api.app import create_app
from reasoning_service.testing.live_server import LiveServer
from testdata import EXAMPLES

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
OPEN = {"not_met", "missing_info", "uncertain"}


def created(client: httpx.Client) -> dict:
    fhir_bundle = json.loads((EXAMPLES / "fhir" / "cpap-example-001.bundle.json").read_text())
    response = client.post(
        "/v1/evaluations", json={"fhir_bundle": fhir_bundle, "policy_id": "NCD-240.4"}
    )
    assert response.status_code == 201, response.text
    return response.json()


def test_the_page_needs_a_key_that_can_read_it_or_a_signed_link(settings, admin_key):
    with LiveServer(create_app(settings)) as server:
        with httpx.Client(base_url=server.url, headers=bearer(admin_key), timeout=60) as admin:
            evaluation = created(admin)
            path = f"/review/{evaluation['evaluation_id']}"
            assert admin.get(path).status_code == 200
            link = admin.post(f"/v1/evaluations/{evaluation['evaluation_id']}/review-link")
            assert link.status_code == 200
        anonymous = httpx.get(server.url + path)
        assert anonymous.status_code == 401
        other = httpx.get(server.url + path, headers=bearer(new_key(settings.db_path)))
        assert other.status_code == 403
        signed = httpx.get(server.url + link.json()["path"])
        assert signed.status_code == 200 and "text/html" in signed.headers["content-type"]
        forged = httpx.get(server.url + link.json()["path"].replace("sig=", "sig=0"))
        assert forged.status_code == 401
        expired = httpx.get(server.url + path, params={"expires": 1, "sig": "0" * 64})
        assert expired.status_code == 401
        garbled = httpx.get(server.url + path, params={"expires": 1, "sig": "æ\u0087ö"})
        assert garbled.status_code == 401


def test_the_page_lists_open_criteria_first_with_evidence_marked(client):
    evaluation = created(client)
    html = client.get(f"/review/{evaluation['evaluation_id']}").text
    order = [r["criterion_id"] for r in evaluation["results"]]
    positions = sorted(order, key=lambda cid: html.index(f'id="{cid.replace("/", "-")}"'))
    status = {r["criterion_id"]: r["status"] for r in evaluation["results"]}
    seen_closed = False
    for criterion_id in positions:
        seen_closed = seen_closed or status[criterion_id] not in OPEN
        assert not (seen_closed and status[criterion_id] in OPEN), positions
    assert "<mark>AHI: 11 events/hour</mark>" in html
    assert f"/v1/evaluations/{evaluation['evaluation_id']}/trace" in html
    assert "<script" not in html and "https://" not in html  # no scripts, no external assets


@pytest.mark.skipif(
    CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it)"
)
def test_the_page_renders_in_headless_chromium_without_javascript(client, tmp_path):
    from playwright.sync_api import sync_playwright

    evaluation = created(client)
    link = client.post(f"/v1/evaluations/{evaluation['evaluation_id']}/review-link").json()
    url = str(client.base_url).rstrip("/") + link["path"]
    problems: list[str] = []
    screenshot = tmp_path / "review-page.png"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync"],
        )
        context = browser.new_context(
            java_script_enabled=False, viewport={"width": 1366, "height": 900}
        )
        page = context.new_page()
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        page.on(
            "request",
            lambda r: None if r.url.startswith(url.split("/review")[0]) else problems.append(r.url),
        )
        page.goto(url)
        recommendation = page.inner_text("#recommendation")
        articles = page.locator("article.criterion")
        statuses = [articles.nth(n).get_attribute("data-status") for n in range(articles.count())]
        marks = page.locator("mark").all_inner_texts()
        page.screenshot(path=str(screenshot), full_page=True)
        browser.close()
    print(f"review page screenshot: {screenshot}")
    assert problems == []
    assert recommendation.strip() == "Pend for review"
    first_closed = next((n for n, s in enumerate(statuses) if s not in OPEN), len(statuses))
    assert all(s in OPEN for s in statuses[:first_closed])
    assert all(s not in OPEN for s in statuses[first_closed:])
    assert "AHI: 11 events/hour" in marks
    assert screenshot.stat().st_size > 10_000
