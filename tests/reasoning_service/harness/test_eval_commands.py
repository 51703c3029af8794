"""`reasoning-service eval run` and `eval compare` end to end, on a dataset outside the repo."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from reasoning_service.cli import main
from testdata import EXAMPLES, FIXTURES

CASE = FIXTURES / "cpap-dev-001.json"


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    """A labeled set in its own folder, with case paths relative to the .jsonl."""
    folder = tmp_path / "elsewhere" / "eval"
    (folder / "cases").mkdir(parents=True)
    shutil.copy(CASE, folder / "cases" / CASE.name)
    lines = [
        {
            "example_id": f"cpap-dev-001/{cid}",
            "case": f"cases/{CASE.name}",
            "policy_id": "NCD-240.4",
            "criterion_id": cid,
            "gold_status": status,
            "gold_policy_quote": "",
            "gold_case_quotes": [],
        }
        for cid, status in [("NCD-240.4/C1", "met"), ("NCD-240.4/C9", "not_applicable")]
    ]
    path = folder / "set.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    return path


def test_eval_run_writes_results_summary_and_report_and_compare_shows_flips(
    dataset, tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("REASONING_DB_PATH", str(tmp_path / "db.sqlite"))
    data = tmp_path / "data"
    shutil.copytree(EXAMPLES / "policies", data / "policies")
    shutil.copytree(EXAMPLES / "criteria", data / "criteria")

    args = ["eval", "run", "--dataset", str(dataset), "--data", str(data)]
    assert main([*args, "--out", str(tmp_path / "a")]) == 0
    assert main([*args, "--out", str(tmp_path / "b"), "--limit", "1"]) == 0

    run_a = tmp_path / "a"
    rows = [json.loads(line) for line in (run_a / "results.jsonl").read_text().splitlines()]
    assert {r["example_id"] for r in rows} == {
        "cpap-dev-001/NCD-240.4/C1",
        "cpap-dev-001/NCD-240.4/C9",
    }
    assert all(
        {"gold_status", "status", "confidence", "usage", "policy_citations"} <= r.keys()
        for r in rows
    )
    summary = json.loads((run_a / "summary.json").read_text())
    assert summary["run_info"]["controller"] == "heuristic" and summary["metrics"]["n"] == 2
    assert "<img" in (run_a / "report.html").read_text()

    capsys.readouterr()
    assert main(["eval", "compare", str(run_a), str(tmp_path / "b")]) == 0
    comparison = capsys.readouterr().out
    assert "Examples in both: 1; only in A: 1" in comparison and "Composite score" in comparison


def test_eval_run_without_an_llm_refuses_react(dataset, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("REASONING_DB_PATH", str(tmp_path / "db.sqlite"))
    code = main(
        [
            "eval",
            "run",
            "--dataset",
            str(dataset),
            "--controller",
            "react",
            "--out",
            str(tmp_path / "r"),
        ]
    )
    assert code == 2
    assert "REASONING_LLM_PROVIDER" in capsys.readouterr().err


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(
    CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it)"
)
def test_the_report_renders_in_a_real_browser_with_its_plots_and_no_console_errors(
    dataset, tmp_path, monkeypatch
):
    from playwright.sync_api import sync_playwright

    monkeypatch.setenv("REASONING_DB_PATH", str(tmp_path / "db.sqlite"))
    out = tmp_path / "run"
    assert main(["eval", "run", "--dataset", str(dataset), "--out", str(out)]) == 0

    problems: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        page = browser.new_page()
        page.on(
            "console", lambda m: problems.append(m.text) if m.type in {"error", "warning"} else None
        )
        page.on("pageerror", lambda error: problems.append(str(error)))
        page.on(
            "request",
            lambda r: None if r.url.startswith(("file:", "data:")) else problems.append(r.url),
        )
        page.goto((out / "report.html").as_uri())
        images = page.evaluate("Array.from(document.images).map(i => i.complete && i.naturalWidth)")
        headings = page.evaluate(
            "Array.from(document.querySelectorAll('h2')).map(h => h.textContent)"
        )
        browser.close()
    assert problems == []
    assert len(images) >= 2 and all(width and width > 100 for width in images)
    assert "Summary" in headings


@pytest.fixture
def messy_dataset(dataset: Path) -> Path:
    """The two good examples, and one of each kind of bad line between them."""
    good = dataset.read_text().splitlines()
    example = json.loads(good[0])
    bad = [
        '{"example_id": "broken", "case": ',  # not JSON
        json.dumps({**example, "example_id": "no-such-policy", "policy_id": "NCD-999"}),
        json.dumps(
            {**example, "example_id": "bad-case", "case": {"case_id": "x", "facts": []}}
        ),  # the case fails validation: nothing to evaluate
        json.dumps({**example, "example_id": "no-such-criterion", "criterion_id": "NCD-240.4/C99"}),
    ]
    dataset.write_text("\n".join([good[0], *bad, good[1]]) + "\n")
    return dataset


def test_eval_run_records_invalid_examples_as_error_rows_and_goes_on(
    messy_dataset, tmp_path, monkeypatch
):
    monkeypatch.setenv("REASONING_DB_PATH", str(tmp_path / "db.sqlite"))
    out = tmp_path / "run"
    assert main(["eval", "run", "--dataset", str(messy_dataset), "--out", str(out)]) == 0

    rows = {
        r["example_id"]: r
        for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())
    }
    assert len(rows) == 6
    assert rows["cpap-dev-001/NCD-240.4/C1"]["error"] is None
    broken = rows[f"{messy_dataset}:2"]
    assert broken["invalid"] and "not valid JSON" in broken["error"]
    assert rows["bad-case"]["invalid"] and "invalid example" in rows["bad-case"]["error"]
    assert "NCD-999" in rows["no-such-policy"]["error"]
    assert "C99" in rows["no-such-criterion"]["error"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["counts"]["invalid"] == 2  # bad lines: out of the metrics
    assert summary["counts"]["errors"] == 2  # valid lines that could not be evaluated
    assert summary["metrics"]["n"] == 4

    # Resuming records nothing twice.
    assert main(["eval", "run", "--dataset", str(messy_dataset), "--out", str(out)]) == 0
    assert len((out / "results.jsonl").read_text().splitlines()) == 6


def test_eval_run_strict_stops_at_the_first_invalid_line(
    messy_dataset, tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("REASONING_DB_PATH", str(tmp_path / "db.sqlite"))
    out = tmp_path / "run"
    code = main(["eval", "run", "--dataset", str(messy_dataset), "--out", str(out), "--strict"])
    assert code != 0
    assert "not valid JSON" in capsys.readouterr().err
    assert not (out / "results.jsonl").exists()
