"""Run a local OpenAI-compatible LLM server (llama-cpp-python) as a supervised subprocess.

Why a subprocess and not in-process ``llama_cpp.Llama``: the agent talks to every
provider through the OpenAI chat-completions API, so the local model is reached the same
way (same client, same tool-calling code path, same error mapping) and a native crash in
llama.cpp kills only the child, which the supervisor restarts, never the service.

Why these server flags (measured, see docs/local-llm.md):

* no ``--chat_format``: the GGUF's own Jinja chat template is used. It is the only mode
  that passes ``role: tool`` results to the model (``chatml-function-calling`` drops them);
* ``--n_ctx 4096`` fits a ReAct prompt with a few tool results for the small Qwen models;
* ``--n_threads`` = usable cores (or ``REASONING_LOCAL_THREADS``): generation is CPU-bound;
* ``--host 127.0.0.1`` and a free ephemeral port: the server is for this process only.

Only a *named* ``tool_choice`` (``{"type": "function", "function": {"name": ...}}``) gives
grammar-constrained, reliably valid tool calls on this server; ``auto`` and ``required``
do not (see the docs). Assistant messages that carry ``tool_calls`` must send
``content: ""`` rather than ``null``.

Nothing here logs prompts, completions or case data: only paths, ports, pids, exit codes
and timings.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import importlib.util
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self

import httpx

from reasoning_service.errors import ConfigError, ProviderUnavailable

logger = logging.getLogger(__name__)

PROVIDER = "local"
#: File names written by ``scripts/assemble_model.py``, by model name.
MODEL_FILES: dict[str, str] = {
    "qwen2.5-coder-0.5b": "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    "qwen2.5-coder-1.5b": "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
}
DEFAULT_MODELS_DIR = Path(__file__).resolve().parents[3] / "models"


class LocalServerError(ProviderUnavailable):
    """The local server could not be started, did not become ready, or keeps dying.

    A ``TransientLLMError``: callers retry / fall back exactly as for a remote outage.
    """

    def __init__(self, message: str, *, model: str) -> None:
        super().__init__(message, provider=PROVIDER, model=model)


def is_runtime_installed() -> bool:
    """True when ``llama_cpp`` (llama-cpp-python) can be imported by this interpreter.

    Cheap (does not load the native library), so it can gate tests and settings checks.
    Install it with ``scripts/setup_local.sh``.
    """
    return importlib.util.find_spec("llama_cpp") is not None


_COMPILE_SCHEMAS = """
import json, sys
from llama_cpp.llama_grammar import json_schema_to_gbnf
for number, schema in enumerate(json.load(sys.stdin)):
    try:
        json_schema_to_gbnf(json.dumps(schema))
    except Exception as exc:
        sys.exit(f"schema {number}: {type(exc).__name__}: {exc}")
"""


def compile_json_schemas(schemas: Sequence[Mapping[str, Any]], *, timeout_s: float = 60) -> None:
    """Convert each schema to a llama.cpp grammar, as the server does for `response_format`.

    The server falls back to unconstrained JSON, silently, when a conversion fails; so the
    service converts its schemas once at start-up instead. It runs in a child interpreter (the
    one that runs the server), so the service process never imports `llama_cpp`.

    Raises:
        ConfigError: a schema does not convert, or the runtime is missing.
    """
    done = subprocess.run(
        [sys.executable, "-c", _COMPILE_SCHEMAS],
        input=json.dumps(list(schemas)),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise ConfigError(f"llama.cpp cannot turn a JSON schema into a grammar: {last}")


_PREFIX_HIT = re.compile(r"Llama\.generate: (\d+) prefix-match hit")
_FULL_HIT = "full prompt already cached"
_COMPLETION_DONE = re.compile(r'"POST /v1/chat/completions HTTP/1\.1" \d{3}')


class PromptCacheLog:
    """The prompt tokens llama.cpp reused from its cache, read from the server's log.

    llama-cpp-python's server does not report cached tokens in `usage` (no
    `prompt_tokens_details`); with `verbose` on (its default) it logs
    `Llama.generate: N prefix-match hit, remaining M prompt tokens to eval` for a request that
    reused a prefix. `reused()` reads the log from where it last stopped and returns, per
    finished request, the reused tokens (0 when nothing was reused, -1 when the whole prompt
    was). Exact only while requests run one at a time, as measurements run them.
    """

    def __init__(self, path: Path) -> None:
        self._path = path
        self._offset = path.stat().st_size if path.exists() else 0

    def reused(self) -> list[int]:
        with self._path.open("rb") as log:
            log.seek(self._offset)
            text = log.read().decode("utf-8", "replace")
        finished = list(_COMPLETION_DONE.finditer(text))
        if finished:
            self._offset += len(text[: finished[-1].end()].encode("utf-8", "replace"))
        counts, start = [], 0
        for done in finished:
            segment = text[start : done.start()]
            hit = _PREFIX_HIT.search(segment)
            counts.append(-1 if _FULL_HIT in segment else int(hit.group(1)) if hit else 0)
            start = done.end()
        return counts


def find_model(
    models_dir: Path | str | None = None, name: str = "qwen2.5-coder-0.5b"
) -> Path | None:
    """Return the GGUF for ``name`` in ``models_dir`` (default ``<repo>/models``), or None.

    ``name`` is a model name known to ``scripts/assemble_model.py`` (e.g.
    ``qwen2.5-coder-0.5b``), a file name, or a file stem; a path that exists is returned
    as is. ``None`` means "not assembled here": callers skip or fall back.
    """
    direct = Path(name)
    if direct.suffix == ".gguf" and direct.is_file():
        return direct
    base = Path(models_dir) if models_dir is not None else DEFAULT_MODELS_DIR
    for candidate in (MODEL_FILES.get(name), name, f"{name}.gguf"):
        if candidate and (base / candidate).is_file():
            return base / candidate
    return None


def usable_cores() -> int:
    """CPU cores this process may run on (affinity-aware where the OS tells us)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _parent_death_signal() -> Callable[[], None] | None:
    """Linux only: a ``preexec_fn`` making the kernel SIGKILL the child if we die.

    ``atexit`` does not run when this process is killed by a signal, and the child is in
    its own session, so without this a SIGTERM/SIGKILL to the service would leave an
    orphan server holding a port and the model's memory (observed while measuring).
    The libc function is resolved here, before fork, so the child only makes one call.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig = 1

    def set_pdeathsig() -> None:
        prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)

    return set_pdeathsig


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


# Servers still running at interpreter exit are killed so no orphan keeps a port and
# ~0.5-1.5 GB of RAM after a crash or a forgotten aclose().
_LIVE: weakref.WeakSet[LocalLlamaServer] = weakref.WeakSet()


@atexit.register
def _kill_leftovers() -> None:
    for server in list(_LIVE):
        server._kill_now()


class LocalLlamaServer:
    """Start, health-check, supervise and stop ``python -m llama_cpp.server``.

    Usage::

        async with LocalLlamaServer(find_model()) as server:
            client = openai.AsyncOpenAI(base_url=server.base_url, api_key="local")
            await server.ensure_running()   # optional check-before-use
            ...

    The port is chosen once and kept across restarts, so ``base_url`` stays valid for
    clients created earlier. A background supervisor task (``supervise=True``) notices a
    dead child within ``check_interval_s`` and restarts it, at most ``max_restarts``
    times in a row without a healthy ``min_uptime_s`` in between; ``ensure_running()``
    does the same check synchronously before a call.
    """

    def __init__(
        self,
        model_path: Path | str,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        model_alias: str | None = None,
        python: str = sys.executable,
        module: str = "llama_cpp.server",
        extra_args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        startup_timeout_s: float = 120.0,
        stop_timeout_s: float = 10.0,
        supervise: bool = True,
        check_interval_s: float = 1.0,
        max_restarts: int = 5,
        min_uptime_s: float = 30.0,
        log_path: Path | str | None = None,
    ) -> None:
        self.model_path = Path(model_path)
        self.host = host
        self.n_ctx = n_ctx
        # `Settings.local_threads` (REASONING_LOCAL_THREADS) is passed in as `n_threads`.
        self.n_threads = n_threads or usable_cores()
        self.model_alias = model_alias or self.model_path.stem
        self.python = python
        self.module = module
        self.extra_args = tuple(extra_args)
        self.env = dict(env) if env is not None else None
        self.startup_timeout_s = startup_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.supervise = supervise
        self.check_interval_s = check_interval_s
        self.max_restarts = max_restarts
        self.min_uptime_s = min_uptime_s
        self._port = port
        self._log_path = Path(log_path) if log_path else None
        self._log_file: IO[bytes] | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._started_at = 0.0
        self._lock = asyncio.Lock()
        self._supervisor: asyncio.Task[None] | None = None
        self._closing = False
        self._failures_in_a_row = 0
        self.restarts = 0
        """How many times the child was restarted after dying (for tests and metrics)."""

    # ------------------------------------------------------------------ properties
    @property
    def port(self) -> int:
        """The loopback port (chosen on first start when not given)."""
        if self._port is None:
            raise RuntimeError("server not started yet")
        return self._port

    @property
    def base_url(self) -> str:
        """OpenAI-compatible base URL, e.g. ``http://127.0.0.1:41234/v1``."""
        return f"http://{self.host}:{self.port}/v1"

    @property
    def pid(self) -> int | None:
        """PID of the current child process, or None when not running."""
        return self._proc.pid if self._proc is not None else None

    @property
    def is_running(self) -> bool:
        """True while the child process exists (not necessarily ready)."""
        return self._proc is not None and self._proc.poll() is None

    @property
    def log_path(self) -> Path | None:
        """Where the child's stdout/stderr go (model-load info and timings, no prompts)."""
        return self._log_path

    def command(self) -> list[str]:
        """The exact argv used to start the server (exposed for docs and debugging)."""
        return [
            self.python, "-m", self.module,
            "--model", str(self.model_path),
            "--model_alias", self.model_alias,
            "--host", self.host,
            "--port", str(self.port),
            "--n_ctx", str(self.n_ctx),
            "--n_threads", str(self.n_threads),
            *self.extra_args,
        ]  # fmt: skip

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> Self:
        """Start the child and wait until ``GET /v1/models`` answers 200.

        Raises ``ConfigError`` when the runtime or the model file is missing (a
        deployment problem, never retried) and ``LocalServerError`` when the child exits
        or does not become ready within ``startup_timeout_s``.
        """
        if self.module == "llama_cpp.server" and not is_runtime_installed():
            raise ConfigError("llama-cpp-python is not installed: run scripts/setup_local.sh")
        if not self.model_path.is_file():
            raise ConfigError(f"model file not found: {self.model_path}")
        self._closing = False
        async with self._lock:
            if not self.is_running:
                await self._spawn_and_wait()
        if self.supervise and (self._supervisor is None or self._supervisor.done()):
            self._supervisor = asyncio.create_task(
                self._supervise(), name=f"llama-server-supervisor:{self.model_alias}"
            )
        return self

    async def ensure_running(self) -> None:
        """Check before use: restart the child if it has died (no-op when healthy).

        Cheap when the process is alive (a ``poll()``), so callers may call it before
        every request; it does not probe HTTP readiness of a live process.
        """
        if self._closing:
            raise LocalServerError("server is closed", model=self.model_alias)
        if self.is_running:
            return
        async with self._lock:
            if not self.is_running and not self._closing:
                await self._restart("found dead before use")

    async def aclose(self) -> None:
        """Stop supervising, then stop the child: SIGTERM, wait, SIGKILL if needed."""
        self._closing = True
        if self._supervisor is not None:
            self._supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._supervisor
            self._supervisor = None
        async with self._lock:
            await self._stop_child()
        _LIVE.discard(self)

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # ------------------------------------------------------------------ internals
    async def _spawn_and_wait(self) -> None:
        """Spawn once (retrying once on a port race if the port was auto-chosen)."""
        auto_port = self._port is None
        attempts = 2 if auto_port else 1
        for attempt in range(1, attempts + 1):
            if auto_port and (attempt > 1 or self._port is None):
                self._port = _free_port(self.host)
            self._spawn()
            try:
                await self._wait_ready()
                self._failures_in_a_row = 0
                return
            except LocalServerError:
                exited = self._proc is not None and self._proc.poll() is not None
                await self._stop_child()
                if attempt == attempts or not exited:
                    raise
                logger.warning("local LLM server exited during startup; retrying on a new port")

    def _spawn(self) -> None:
        if self._log_path is None:
            fd, name = tempfile.mkstemp(prefix="llama-server-", suffix=".log")
            os.close(fd)
            self._log_path = Path(name)
        if self._log_file is None or self._log_file.closed:
            self._log_file = self._log_path.open("ab")
        cmd = self.command()
        self._proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            env={**os.environ, **self.env} if self.env is not None else None,
            start_new_session=True,  # a Ctrl-C in the terminal reaches us, not the child
            # Called from the event-loop thread (the kernel ties PDEATHSIG to the forking
            # thread, so never spawn from a short-lived worker thread).
            preexec_fn=_parent_death_signal(),
        )
        self._started_at = time.monotonic()
        _LIVE.add(self)
        logger.info(
            "started local LLM server pid=%s model=%s port=%s n_ctx=%s n_threads=%s log=%s",
            self._proc.pid, self.model_path.name, self.port, self.n_ctx, self.n_threads,
            self._log_path,
        )  # fmt: skip

    async def _wait_ready(self) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + self.startup_timeout_s
        url = f"{self.base_url}/models"
        t0 = time.monotonic()
        async with httpx.AsyncClient(timeout=2.0, trust_env=False) as client:
            while True:
                code = self._proc.poll()
                if code is not None:
                    raise LocalServerError(
                        f"local LLM server exited with code {code} during startup "
                        f"(log: {self._log_path})",
                        model=self.model_alias,
                    )
                with contextlib.suppress(httpx.HTTPError):
                    response = await client.get(url)
                    if response.status_code == 200:
                        logger.info(
                            "local LLM server pid=%s ready in %.1fs",
                            self._proc.pid, time.monotonic() - t0,
                        )  # fmt: skip
                        return
                if time.monotonic() > deadline:
                    raise LocalServerError(
                        f"local LLM server not ready after {self.startup_timeout_s:.0f}s "
                        f"(log: {self._log_path})",
                        model=self.model_alias,
                    )
                await asyncio.sleep(0.25)

    async def _restart(self, why: str) -> None:
        """Restart a dead child; caller holds the lock."""
        code = self._proc.poll() if self._proc is not None else None
        if time.monotonic() - self._started_at >= self.min_uptime_s:
            self._failures_in_a_row = 0
        if self._failures_in_a_row >= self.max_restarts:
            raise LocalServerError(
                f"local LLM server died {self._failures_in_a_row} times in a row; giving up "
                f"(log: {self._log_path})",
                model=self.model_alias,
            )
        self._failures_in_a_row += 1
        logger.warning(
            "local LLM server pid=%s %s (exit code %s); restarting (%d/%d)",
            self.pid, why, code, self._failures_in_a_row, self.max_restarts,
        )  # fmt: skip
        await self._stop_child()
        await self._spawn_and_wait()
        self.restarts += 1

    async def _supervise(self) -> None:
        """Background task: poll the child, restart it when it dies, with backoff."""
        backoff = self.check_interval_s
        while not self._closing:
            await asyncio.sleep(backoff)
            if self._closing or self.is_running:
                backoff = self.check_interval_s
                continue
            try:
                async with self._lock:
                    if not self._closing and not self.is_running:
                        await self._restart("exited unexpectedly")
                backoff = self.check_interval_s
            except LocalServerError as exc:
                if self._failures_in_a_row >= self.max_restarts:
                    logger.error("supervisor giving up: %s", exc)
                    return
                backoff = min(backoff * 2, 30.0)
                logger.warning("restart failed (%s); next try in %.0fs", exc, backoff)

    async def _stop_child(self) -> None:
        proc = self._proc
        if proc is not None:
            if proc.poll() is None:
                proc.terminate()
                try:
                    await asyncio.to_thread(proc.wait, self.stop_timeout_s)
                except subprocess.TimeoutExpired:
                    logger.warning("local LLM server pid=%s ignored SIGTERM; killing", proc.pid)
                    proc.kill()
                    await asyncio.to_thread(proc.wait)
                logger.info("stopped local LLM server pid=%s", proc.pid)
            else:
                proc.wait()
            self._proc = None
        if self._log_file is not None and self._closing:
            self._log_file.close()
            self._log_file = None

    def _kill_now(self) -> None:
        """Synchronous last resort (atexit): never leave an orphan server behind."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.kill()
            with contextlib.suppress(Exception):
                proc.wait(timeout=5)
