"""Tests of the local llama.cpp server wrapper.

Two groups:

* ``local_llm``-marked tests run the real ``llama_cpp.server`` on loopback with the
  assembled GGUF (``scripts/setup_local.sh``). They skip with a reason when the runtime or
  the model is not installed. They assert on structure (ready, schema-valid tool call,
  tool result visible to the model, process lifecycle), never on the model's verdicts.
  Model: ``$LOCAL_LLM_MODEL`` (default ``qwen2.5-coder-0.5b``).
* unmarked tests run everywhere in about a second: path helpers, the argv, and the
  supervisor's start / restart / stop logic against a tiny fake server module.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import textwrap
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from reasoning_service.errors import ConfigError, TransientLLMError
from reasoning_service.llm.local_server import (
    LocalLlamaServer,
    LocalServerError,
    find_model,
    is_runtime_installed,
)

MODEL_NAME = os.environ.get("LOCAL_LLM_MODEL", "qwen2.5-coder-0.5b")

GET_FACT = {
    "type": "function",
    "function": {
        "name": "get_case_fact",
        "description": "Read one extracted fact from the patient's case bundle.",
        "parameters": {
            "type": "object",
            "properties": {"field": {"type": "string", "enum": ["hba1c", "bmi", "age"]}},
            "required": ["field"],
            "additionalProperties": False,
        },
    },
}
SUBMIT = {
    "type": "function",
    "function": {
        "name": "submit_verdict",
        "description": "Submit the verdict for the criterion.",
        "parameters": {
            "type": "object",
            "properties": {
                "status": {"type": "string", "enum": ["met", "not_met", "missing_info"]},
                "confidence": {"type": "number"},
                "rationale": {"type": "string"},
            },
            "required": ["status", "confidence", "rationale"],
            "additionalProperties": False,
        },
    },
}


async def _wait_for(predicate, timeout_s: float) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if await predicate():
            return True
        await asyncio.sleep(0.2)
    return False


async def _models_ok(base_url: str) -> bool:
    try:
        async with httpx.AsyncClient(timeout=2.0, trust_env=False) as client:
            return (await client.get(f"{base_url}/models")).status_code == 200
    except httpx.HTTPError:
        return False


def _pid_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # Still in the table: gone unless it is a zombie we have not reaped (we always reap).
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except OSError:
        return True


# --------------------------------------------------------------------- everywhere


def test_find_model_and_runtime_probe(tmp_path: Path) -> None:
    assert isinstance(is_runtime_installed(), bool)
    assert find_model(tmp_path, "qwen2.5-coder-0.5b") is None
    gguf = tmp_path / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
    gguf.write_bytes(b"GGUF")
    assert find_model(tmp_path, "qwen2.5-coder-0.5b") == gguf
    assert find_model(tmp_path, gguf.name) == gguf
    assert find_model(tmp_path, gguf.stem) == gguf
    assert find_model(None, str(gguf)) == gguf


def test_command_uses_model_template_and_loopback(tmp_path: Path) -> None:
    server = LocalLlamaServer(tmp_path / "m.gguf", port=5555, n_threads=2)
    cmd = server.command()
    assert cmd[1:3] == ["-m", "llama_cpp.server"]
    assert "--chat_format" not in cmd  # the GGUF's own template passes tool results
    assert cmd[cmd.index("--host") + 1] == "127.0.0.1"
    assert cmd[cmd.index("--n_ctx") + 1] == "4096"
    assert cmd[cmd.index("--n_threads") + 1] == "2"
    assert server.base_url == "http://127.0.0.1:5555/v1"


async def test_missing_model_is_a_config_error(tmp_path: Path) -> None:
    server = LocalLlamaServer(tmp_path / "absent.gguf", module="fake_llama_server")
    with pytest.raises(ConfigError):
        await server.start()


FAKE_SERVER = textwrap.dedent(
    """
    import argparse, http.server, json
    p = argparse.ArgumentParser()
    p.add_argument("--host"); p.add_argument("--port", type=int)
    args, _ = p.parse_known_args()

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps({"object": "list", "data": [{"id": "fake"}]}).encode()
            self.send_response(200 if self.path == "/v1/models" else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        def log_message(self, *a):
            pass

    http.server.HTTPServer((args.host, args.port), H).serve_forever()
    """
)


@pytest.fixture
def fake_server(tmp_path: Path) -> LocalLlamaServer:
    (tmp_path / "fake_llama_server.py").write_text(FAKE_SERVER)
    model = tmp_path / "fake.gguf"
    model.write_bytes(b"GGUF")
    return LocalLlamaServer(
        model,
        module="fake_llama_server",
        env={"PYTHONPATH": str(tmp_path)},
        check_interval_s=0.1,
        startup_timeout_s=20,
        stop_timeout_s=5,
    )


async def test_supervisor_restarts_and_aclose_stops_fake(fake_server: LocalLlamaServer) -> None:
    async with fake_server as server:
        assert await _models_ok(server.base_url)
        first_pid, base_url = server.pid, server.base_url
        assert first_pid is not None
        os.kill(first_pid, signal.SIGKILL)

        async def restarted() -> bool:
            return server.restarts >= 1 and server.pid not in (None, first_pid)

        assert await _wait_for(restarted, 20)
        assert server.base_url == base_url  # port kept: existing clients stay valid
        assert await _models_ok(server.base_url)
        last_pid = server.pid
    assert last_pid is not None and _pid_gone(last_pid)
    assert _pid_gone(first_pid)
    assert not server.is_running
    with pytest.raises(LocalServerError):
        await server.ensure_running()


async def test_ensure_running_restarts_without_supervisor(fake_server: LocalLlamaServer) -> None:
    fake_server.supervise = False
    async with fake_server as server:
        pid = server.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        await asyncio.sleep(0.3)
        await server.ensure_running()
        assert server.pid != pid and server.restarts == 1
        assert await _models_ok(server.base_url)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux-only")
async def test_child_dies_with_killed_parent(fake_server: LocalLlamaServer, tmp_path: Path) -> None:
    """SIGKILL to the service skips atexit; the kernel must still take the server down."""
    fake_dir = fake_server.env["PYTHONPATH"] if fake_server.env else ""
    parent = textwrap.dedent(
        f"""
        import asyncio, sys
        from reasoning_service.llm.local_server import LocalLlamaServer
        async def main():
            s = LocalLlamaServer({str(fake_server.model_path)!r}, module="fake_llama_server",
                                 env={{"PYTHONPATH": {fake_dir!r}}}, supervise=False)
            await s.start()
            print(s.pid, flush=True)
            await asyncio.sleep(60)
        asyncio.run(main())
        """
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", parent, stdout=asyncio.subprocess.PIPE
    )
    assert proc.stdout is not None
    line = await asyncio.wait_for(proc.stdout.readline(), 30)
    child = int(line)
    assert not _pid_gone(child)
    proc.kill()
    await proc.wait()

    async def gone() -> bool:
        return _pid_gone(child)

    assert await _wait_for(gone, 10)


async def test_startup_failure_is_transient_error(tmp_path: Path) -> None:
    (tmp_path / "crash_server.py").write_text("import sys; sys.exit(3)\n")
    model = tmp_path / "fake.gguf"
    model.write_bytes(b"GGUF")
    server = LocalLlamaServer(
        model, module="crash_server", env={"PYTHONPATH": str(tmp_path)}, supervise=False
    )
    with pytest.raises(TransientLLMError, match="exited with code 3"):
        await server.start()
    await server.aclose()
    assert not server.is_running


# ------------------------------------------------------------------ real server


def _real_model() -> Path:
    if not is_runtime_installed():
        pytest.skip("llama-cpp-python not installed (run scripts/setup_local.sh)")
    path = find_model(None, MODEL_NAME)
    if path is None:
        pytest.skip(f"model {MODEL_NAME} not assembled (run scripts/setup_local.sh {MODEL_NAME})")
    return path


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def llama_server() -> AsyncIterator[LocalLlamaServer]:
    """One real server for the session: loading the model costs ~1-3 s."""
    server = LocalLlamaServer(_real_model(), check_interval_s=0.5, startup_timeout_s=180)
    await server.start()
    try:
        yield server
    finally:
        await server.aclose()


def _client(server: LocalLlamaServer):  # type: ignore[no-untyped-def]
    openai = pytest.importorskip("openai")
    return openai.AsyncOpenAI(base_url=server.base_url, api_key="local", max_retries=0, timeout=300)


@pytest.mark.local_llm
@pytest.mark.asyncio(loop_scope="session")
async def test_real_server_ready(llama_server: LocalLlamaServer) -> None:
    assert llama_server.is_running
    assert llama_server.base_url.startswith("http://127.0.0.1:")
    models = await _client(llama_server).models.list()
    assert [m.id for m in models.data] == [llama_server.model_alias]


@pytest.mark.local_llm
@pytest.mark.asyncio(loop_scope="session")
async def test_named_tool_choice_gives_schema_valid_call(llama_server: LocalLlamaServer) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    response = await _client(llama_server).chat.completions.create(
        model=llama_server.model_alias,
        messages=[
            {"role": "system", "content": "You check one coverage criterion using tools."},
            {"role": "user", "content": "Criterion: BMI must be 35 or higher."},
        ],
        tools=[GET_FACT, SUBMIT],
        # get_case_fact: a short call (~10 tokens) keeps the test fast on 2 CPU cores.
        tool_choice={"type": "function", "function": {"name": "get_case_fact"}},
        temperature=0,
        max_tokens=64,
    )
    calls = response.choices[0].message.tool_calls
    assert calls, "named tool_choice must yield a tool call"
    assert calls[0].function.name == "get_case_fact"
    args = json.loads(calls[0].function.arguments)
    jsonschema.validate(args, GET_FACT["function"]["parameters"])


@pytest.mark.local_llm
@pytest.mark.asyncio(loop_scope="session")
async def test_tool_result_reaches_model(llama_server: LocalLlamaServer) -> None:
    secret = "58213"  # appears only in the tool message
    response = await _client(llama_server).chat.completions.create(
        model=llama_server.model_alias,
        messages=[
            {"role": "system", "content": "You check one coverage criterion using tools."},
            {"role": "user", "content": "Criterion: HbA1c must be at least 7.0%."},
            {
                "role": "assistant",
                "content": "",  # not None: see docs/local-llm.md
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_case_fact", "arguments": '{"field": "hba1c"}'},
                    }
                ],
            },
            {
                "role": "tool",
                "tool_call_id": "call_1",
                "content": json.dumps({"value": "7.4%", "lab_accession": secret}),
            },
            {
                "role": "user",
                "content": "What is the lab_accession number in the tool result? "
                "Reply with the number only.",
            },
        ],
        tools=[GET_FACT, SUBMIT],
        temperature=0,
        max_tokens=20,
    )
    assert secret in (response.choices[0].message.content or "")


@pytest.mark.local_llm
@pytest.mark.asyncio(loop_scope="session")
async def test_killed_server_is_restarted_by_supervisor(llama_server: LocalLlamaServer) -> None:
    first_pid = llama_server.pid
    assert first_pid is not None
    restarts = llama_server.restarts
    os.kill(first_pid, signal.SIGKILL)

    async def back() -> bool:
        return llama_server.restarts > restarts and await _models_ok(llama_server.base_url)

    assert await _wait_for(back, 120)
    assert llama_server.pid != first_pid
    assert _pid_gone(first_pid)


@pytest.mark.local_llm
@pytest.mark.asyncio(loop_scope="session")
async def test_process_gone_after_aclose() -> None:
    server = LocalLlamaServer(_real_model(), supervise=False, startup_timeout_s=180)
    async with server:
        pid = server.pid
        assert pid is not None and await _models_ok(server.base_url)
    assert _pid_gone(pid)
    assert not server.is_running
    assert not await _models_ok(server.base_url)


@pytest.mark.local_llm
@pytest.mark.asyncio(loop_scope="session")
async def test_a_constrained_atom_answer_parses_and_cites_only_ids_shown(
    llama_server: LocalLlamaServer,
) -> None:
    """The atom path as the `local` provider runs it: JSON under the answer schema, every id one
    of the snippets shown, and the server reusing the cached prompt prefix."""
    from reasoning_service.conditions import ConditionsController, load_vocabulary
    from reasoning_service.conditions.atom_questions import (
        AtomQuestionController,
        snippets_for,
    )
    from reasoning_service.conditions.controller import evaluate_conditions
    from reasoning_service.llm.local_server import PromptCacheLog
    from reasoning_service.llm.openai import OpenAIClient
    from reasoning_service.models import CaseBundle, CriteriaSet, Policy, SourceFormat
    from reasoning_service.models.conditions import FindingAtom
    from reasoning_service.models.task import CriterionTask
    from reasoning_service.prompts import load_prompt
    from reasoning_service.settings import Settings
    from retrieval.markdown import build_tree_from_markdown

    settings = Settings()
    case = CaseBundle.model_validate(
        {
            "case_id": "t-1",
            "as_of": "2026-03-01",
            "documents": [
                {
                    "doc_id": "note-1",
                    "date": "2026-02-20",
                    "pages": ["PMH: hypertension on losartan. Father had a stroke."],
                }
            ],
        }
    )
    atom = FindingAtom(kind="finding", id="htn", label="Hypertension", concept="hypertension",
                       aliases=["HTN"])  # fmt: skip
    criteria = CriteriaSet.model_validate(
        {"policy_id": "T-1", "version": "1", "logic": {"all_of": ["T-1/C1"]},
         "criteria": [{"criterion_id": "T-1/C1", "text": "Hypertension.", "quote": "Hypertension.",
                       "conditions": {"require": {"all_of": [atom.model_dump()]}}}]}
    )  # fmt: skip
    conditions = ConditionsController(load_vocabulary(settings.vocabulary_path))
    reading = conditions.reading(case)
    code = evaluate_conditions(criteria.criteria[0].conditions, reading, 0.7)[0]
    snippets = snippets_for(atom, reading, 0.7)
    sdk = _client(llama_server)
    llm = OpenAIClient(sdk, model=llama_server.model_alias, provider="local",
                       max_tokens_field="max_tokens")  # fmt: skip
    controller = AtomQuestionController(
        llm=llm,
        prompt=load_prompt(settings.prompts_dir, "atoms-local-v1"),
        conditions=conditions,
        fallback=None,
        max_output_tokens=48,
        answer_format="json_schema",
        check_yes=True,
    )
    cache = PromptCacheLog(llama_server.log_path) if llama_server.log_path else None
    policy = Policy(
        policy_id="T-1", version="1", sha256="0" * 64, title="T", criteria=criteria,
        source_format=SourceFormat.MARKDOWN, created_at="2026-01-01T00:00:00Z",
        tree=build_tree_from_markdown("# T\n\nHypertension.\n"),
    )  # fmt: skip
    task = CriterionTask(case=case, policy=policy, criterion=criteria.criteria[0])
    asked = await controller.ask_atom(task, atom, code, snippets)

    assert asked.answer is not None, asked.replies[0].content
    assert set(asked.ids) <= {s.id for s in snippets}
    if cache is not None and len(asked.replies) == 2:
        assert cache.reused()[-1] > asked.replies[0].usage.input_tokens / 2  # prefix reused
