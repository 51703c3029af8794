"""Policies over HTTP: Markdown, PDF and PageIndex uploads, listing, and bad documents."""

from __future__ import annotations

import base64
import hashlib
import json

from fpdf import FPDF

from testdata import EXAMPLES


def test_health_and_readiness(client):
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["policies"] == 5


def test_bundled_policies_are_listed_with_the_manifest_sha256(client):
    manifest = json.loads((EXAMPLES / "policies" / "manifest.json").read_text())
    listed = {p["policy_id"]: p for p in client.get("/v1/policies").json()}
    for entry in manifest["policies"]:
        assert listed[entry["policy_id"]]["sha256"] == entry["sha256"]
        assert listed[entry["policy_id"]]["version"] == entry["version"]


def test_policy_comes_with_its_tree_and_criteria(client):
    policy = client.get("/v1/policies/NCD-100.1").json()
    assert policy["tree"][0]["node_id"] == "0000"
    assert policy["criteria"]["logic"]["all_of"]


MARKDOWN = "# Test Policy\n\n## Coverage\n\nPatients must be at least 18 years old.\n"


def test_markdown_upload_returns_id_version_and_sha256(client):
    criteria = {
        "policy_id": "TEST-1",
        "version": "2",
        "criteria": [
            {"criterion_id": "TEST-1/C1", "text": "Adult", "quote": "at least 18 years old"}
        ],
        "logic": "TEST-1/C1",
    }
    response = client.post(
        "/v1/policies",
        json={
            "policy_id": "TEST-1",
            "version": "2",
            "source_format": "markdown",
            "content": MARKDOWN,
            "criteria": criteria,
        },
    )
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["sha256"] == hashlib.sha256(MARKDOWN.encode()).hexdigest()
    assert body["title"] == "Test Policy" and body["criteria_count"] == 1


def test_criteria_quoting_text_the_policy_lacks_are_rejected(client):
    criteria = {
        "policy_id": "TEST-2",
        "version": "1",
        "criteria": [{"criterion_id": "TEST-2/C1", "text": "x", "quote": "not in the text"}],
        "logic": "TEST-2/C1",
    }
    response = client.post(
        "/v1/policies",
        json={
            "policy_id": "TEST-2",
            "source_format": "markdown",
            "content": MARKDOWN,
            "criteria": criteria,
        },
    )
    assert response.status_code == 422
    assert "TEST-2/C1" in response.json()["message"]
    assert client.get("/v1/policies/TEST-2").status_code == 404


def test_pdf_upload_keeps_real_page_numbers(client):
    pdf = FPDF()
    pdf.set_font("Helvetica", size=12)
    for title in ("Scope", "Coverage", "Limits"):
        pdf.add_page()
        pdf.start_section(title)
        pdf.multi_cell(0, 8, f"{title} section text for the test policy.")
    data = bytes(pdf.output())
    response = client.post(
        "/v1/policies",
        json={
            "policy_id": "PDF-1",
            "title": "PDF policy",
            "source_format": "pdf",
            "content": base64.b64encode(data).decode(),
        },
    )
    assert response.status_code == 201, response.text
    tree = client.get("/v1/policies/PDF-1").json()["tree"]
    pages = {node["title"]: (node["start_index"], node["end_index"]) for node in tree}
    assert pages == {"Scope": (1, 1), "Coverage": (2, 2), "Limits": (3, 3)}


def test_pageindex_tree_round_trips(client):
    structure = {
        "doc_name": "pi.pdf",
        "structure": [
            {
                "title": "Intro",
                "node_id": "0000",
                "start_index": 1,
                "end_index": 2,
                "summary": "s",
                "nodes": [
                    {
                        "title": "Detail",
                        "node_id": "0001",
                        "start_index": 2,
                        "end_index": 2,
                        "nodes": [],
                    }
                ],
            }
        ],
    }
    response = client.post(
        "/v1/policies",
        json={"policy_id": "PI-1", "source_format": "pageindex", "content": structure},
    )
    assert response.status_code == 201, response.text
    tree = client.get("/v1/policies/PI-1").json()["tree"]
    assert tree[0]["nodes"][0]["title"] == "Detail" and tree[0]["end_index"] == 2


def test_bad_documents_get_422_with_the_reason(client):
    not_pdf = client.post(
        "/v1/policies",
        json={
            "policy_id": "BAD-1",
            "source_format": "pdf",
            "content": base64.b64encode(b"hello").decode(),
        },
    )
    assert not_pdf.status_code == 422 and "content" in not_pdf.json()["message"]
    not_base64 = client.post(
        "/v1/policies", json={"policy_id": "BAD-2", "source_format": "pdf", "content": "%%%"}
    )
    assert not_base64.status_code == 422 and "base64" in not_base64.json()["message"]
    bad_tree = client.post(
        "/v1/policies",
        json={
            "policy_id": "BAD-3",
            "source_format": "pageindex",
            "content": {"structure": [{"x": 1}]},
        },
    )
    assert bad_tree.status_code == 422
    wrong_format = client.post(
        "/v1/policies", json={"policy_id": "BAD-4", "source_format": "docx", "content": "x"}
    )
    assert wrong_format.status_code == 422 and "source_format" in wrong_format.json()["message"]
