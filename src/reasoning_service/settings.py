"""The one typed configuration object, read from the environment (prefix `REASONING_`).

Every default works offline with no API key: the heuristic controller, a SQLite file in the
working directory. The CLI and the server build it the same way (`Settings()`) and pass it down.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, get_args

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from reasoning_service.errors import ConfigError

_REPO_ROOT = Path(__file__).resolve().parents[2]
ToolCallingMode = Literal["native", "forced", "text"]
AtomAnswerFormat = Literal["tool", "json_schema"]
AtomKind = Literal["quantity", "finding", "time_window", "category"]


def check_controller_mode(value: str) -> str:
    """Normalise a routing mode; ConfigError unless heuristic, react, shadow or ab:<0-100>.

    The one rule for the mode, wherever it comes from: `REASONING_CONTROLLER` (checked when
    `Settings` is built) and the rollout flags file (checked on each re-read)."""
    mode = str(value).strip().lower()
    if mode in {"heuristic", "react", "shadow"}:
        return mode
    if mode.startswith("ab:"):
        try:
            percent = float(mode.removeprefix("ab:"))
        except ValueError:
            percent = -1.0
        if 0.0 <= percent <= 100.0:
            return mode
    raise ConfigError(f"controller={value!r}: expected heuristic, react, shadow or ab:<0-100>")


def check_database_url(url: str) -> str:
    """ConfigError unless `url` is `sqlite:///<path>` or `postgresql://…`."""
    if url.startswith(("postgresql://", "postgres://")):
        return url
    if url.startswith("sqlite:///") and len(url) > len("sqlite:///"):
        return url
    scheme = url.split("://", 1)[0] if "://" in url else "(none)"
    raise ConfigError(
        f"database_url: scheme {scheme!r} is not supported; use sqlite:///<path> or "
        "postgresql://user:password@host:port/database"
    )


class Settings(BaseSettings):
    """Service configuration. Each field is `REASONING_<FIELD>` in the environment."""

    model_config = SettingsConfigDict(
        env_prefix="REASONING_",
        env_file=None,
        extra="ignore",
        use_attribute_docstrings=True,
    )

    # --- storage -------------------------------------------------------------------------
    database_url: str | None = None
    """Where policies, evaluations, results, traces and LLM interactions are kept:
    `sqlite:///<path>` (one file, `sqlite:////abs/path` for an absolute path) or
    `postgresql://user:password@host:port/database` (many processes; needed by asynchronous
    evaluations). Unset: `sqlite:///` + `db_path`."""
    db_path: Path = Path("reasoning.db")
    """The shorthand for a SQLite `database_url`: the file, when `database_url` is unset."""
    db_pool_size: int = Field(default=4, ge=1, le=64)
    """PostgreSQL connections (and store threads) per process."""

    seed_examples: bool = True
    """Index the bundled example policies (`examples/`) at start-up when they are not stored."""
    examples_dir: Path = _REPO_ROOT / "examples"
    vocabulary_path: Path = _REPO_ROOT / "vocabulary" / "clinical-synonyms.json"
    """General clinical vocabulary (synonyms, unit spellings, ConText cues) for the conditions."""
    fact_min_confidence: float = Field(default=0.7, ge=0.0, le=1.0)
    """Extracted facts below this confidence count only where the document text agrees."""

    # --- routing ---------------------------------------------------------------------------
    controller: str = "heuristic"
    """`heuristic`, `react`, `shadow` (serve heuristic, run react in the background) or
    `ab:<percent>` (that percentage of cases goes to react)."""

    # --- LLM provider ----------------------------------------------------------------------
    llm_provider: Literal["openai", "anthropic", "local"] | None = None
    """None means no LLM is configured: `react` then falls back at once."""
    llm_model: str = "gpt-4o-mini"
    llm_base_url: str | None = None
    """OpenAI-compatible servers (vLLM, llama.cpp) or a proxy; the SDK default when None."""
    llm_api_key: SecretStr | None = None
    llm_timeout_s: float = Field(default=60.0, gt=0)
    llm_max_output_tokens: int = Field(default=800, ge=16)
    tool_calling_mode: ToolCallingMode | None = None
    """How the model calls tools: `native` function calling, one `forced` function chosen by
    name (small local models), or the `text` ReAct format (Thought / Action / Action Input).
    Unset: `forced` for the `local` provider, `native` for the others."""
    local_model: str = "qwen2.5-coder-0.5b"
    """Packaged GGUF model the `local` provider serves (see docs/local-llm.md)."""
    models_dir: Path = _REPO_ROOT / "models"
    """Where `make setup-local` assembles the model files."""
    local_threads: int | None = Field(default=None, ge=1)
    """llama.cpp threads; all usable cores when unset. On a busy 2-core machine 1 thread
    measured 4-8x faster than 2 (llama.cpp's threads spin-wait on each other)."""
    tree_search: Literal["llm", "lexical"] = "llm"
    """`pi_search` by LLM reasoning over the table of contents, or FTS5 bm25 only."""
    llm_fallback: Literal["heuristic", "uncertain"] = "heuristic"
    """What a criterion gets when the LLM fails for good."""

    # --- prompt optimisation (GEPA) ---------------------------------------------------------
    reflection_provider: Literal["openai", "anthropic", "local"] | None = None
    """Model that proposes new prompts; the main LLM settings are used when unset."""
    reflection_model: str | None = None
    reflection_base_url: str | None = None
    reflection_api_key: SecretStr | None = None

    # --- ReAct loop --------------------------------------------------------------------------
    prompt_id: str = "react-v1"
    """Versioned system prompt under `prompts_dir`."""
    prompts_dir: Path = _REPO_ROOT / "prompts"
    atom_questions: bool = True
    """Criteria with conditions: code decides the atoms it can and the model answers one narrow
    question per remaining atom, instead of the ReAct loop (docs/conditions.md)."""
    atom_prompt_id: str | None = None
    """Versioned system prompt of the atom questions, under `prompts_dir`. Unset: `atoms-local-v1`
    (short, for a stable cached prefix) for the `local` provider, `atoms-v1` for the others."""
    atom_answer_format: AtomAnswerFormat | None = None
    """How the model answers an atom question: a forced `tool` call, or `json_schema`-constrained
    JSON text (llama.cpp's grammar: valid JSON, ids only from the snippets shown). Unset:
    `json_schema` for the `local` provider, `tool` for the others."""
    atom_check_yes: bool | None = None
    """Ask every "yes" that would hold again in negated form; a second "yes" makes the atom
    conflicting. Unset: on for the `local` provider (small models say "yes" too easily)."""
    atom_ask_decided: bool | None = None
    """Also ask the model about findings code decided (a second reading: it can confirm code or
    make the atom conflicting). Unset: off for the `local` provider, whose second readings only
    turned code's right verdicts into conflicts (docs/local-llm.md), on for hosted models."""
    atom_model_kinds: list[AtomKind] | None = None
    """Kinds of atoms code left open that the model is asked about (JSON list). Unset: all for
    hosted models; `finding` and `category` for the `local` provider, whose "yes" about a
    number or a date it cannot read was a guess (docs/local-llm.md)."""
    max_iterations: int = Field(default=10, ge=1, le=50)
    token_budget: int = Field(default=6000, ge=500)
    """Input plus output tokens per criterion, checked before each LLM call."""
    abstain_below: float = Field(default=0.65, ge=0.0, le=1.0)
    """Results less confident than this become `uncertain` (`low_confidence`)."""
    criterion_concurrency: int = Field(default=4, ge=1, le=64)
    """Criteria of one evaluation evaluated at the same time."""
    evaluation_deadline_s: float | None = Field(default=None, gt=0)
    """Wall-clock seconds an evaluation's LLM criteria may take (queueing included); criteria
    still open then come back `uncertain` with reason `deadline`. Unset: no deadline."""
    citation_min_words: int = Field(default=3, ge=1, le=20)
    """Words a case quote needs before a `met`/`not_met` may stand on it."""

    # --- admission (service/admission.py) ----------------------------------------------------
    max_evaluations_in_progress: int = Field(default=8, ge=1, le=4096)
    """Evaluations run at once through the API. The conditions controller is CPU-bound and
    runs on one core at a time (the GIL): 8 keeps both of 2 cores busy (parsing, storage)
    without making every request wait for all the others. LLM-bound (`react`) evaluations
    mostly wait on the network: raise it to what the provider's rate limit allows."""
    max_evaluations_waiting: int = Field(default=16, ge=0, le=65536)
    """Evaluations that may wait for a slot; beyond it the API answers 503 with Retry-After."""
    admission_max_wait_s: float = Field(default=5.0, ge=0, le=600)
    """The longest an evaluation waits for a slot before it is answered 503 with Retry-After."""
    conditions_threads: int = Field(default=1, ge=1, le=64)
    """Worker threads of the conditions controller. Its work is pure Python, so more threads
    add no speed (the GIL) but take the GIL from the event loop more often: with asyncio's
    default pool (6 threads on 2 cores) /healthz waited hundreds of ms under load."""

    # --- asynchronous evaluations (service/jobs.py; PostgreSQL only) --------------------------
    worker_concurrency: int = Field(default=4, ge=1, le=256)
    """Jobs one `reasoning-service worker` runs at once."""
    worker_heartbeat_s: float = Field(default=2.0, gt=0, le=300)
    """How often a worker tells the queue it is alive."""
    worker_stalled_after_s: float = Field(default=10.0, gt=0, le=3600)
    """A worker silent this long is taken for dead and its running jobs are queued again for
    another worker. Keep it several heartbeats long."""

    # --- retries -----------------------------------------------------------------------------
    retry_max_attempts: int = Field(default=3, ge=0, le=10)
    """Retries after the first try, for transient errors only."""
    retry_base_s: float = Field(default=1.0, ge=0)
    """Backoff is base, 2×base, 4×base …"""
    retry_after_cap_s: float = Field(default=30.0, ge=0)
    """A provider's Retry-After is honoured up to this."""

    # --- server --------------------------------------------------------------------------------
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    log_level: str = "INFO"
    log_format: Literal["json", "text"] = "json"
    """`json`: one object a line with allow-listed fields only (no case content, no secrets)."""

    # --- rollout -------------------------------------------------------------------------------
    flags_file: Path | None = None
    """JSON file `{"controller": "ab:20", "candidate_prompt_id": "react-v2"}` re-read whenever
    its mtime changes: flips routing without a restart. Absent keys fall back to the settings."""
    candidate_prompt_id: str | None = None
    """When set, `shadow` and `ab:<percent>` compare two prompt versions of the ReAct controller
    (`prompt_id` is the control, this the candidate) instead of heuristic against react."""
    ab_salt: str = "reasoning-ab-v1"
    """Salt of the case-id hash that assigns A/B arms; change it to reshuffle the arms."""
    shadow_max_pending: int = Field(default=32, ge=0, le=1024)
    """Shadow runs in flight at once; beyond it a comparison is skipped (and counted)."""

    # --- input limits (every request is bounded before it is parsed or stored) ---------------
    max_body_bytes: int = Field(default=2 * 1024 * 1024, ge=1024)
    """Largest request body; a longer one gets 413 before it is parsed (chunked bodies too)."""
    max_attachment_bytes: int = Field(default=1_000_000, ge=1)
    """Largest decoded attachment of a FHIR DocumentReference (text or PDF)."""
    review_link_secret: SecretStr | None = None
    """Key that signs reviewer's-page links; unset: a random key per process."""
    review_link_ttl_s: int = Field(default=900, ge=1, le=7 * 24 * 3600)
    """How long a signed reviewer's-page link (`GET /review/{id}?expires=…&sig=…`) works."""
    max_documents: int = Field(default=50, ge=1)
    """Documents in one case bundle."""
    max_pages_per_document: int = Field(default=500, ge=1)
    max_page_chars: int = Field(default=100_000, ge=1)
    """Characters in one page of a case document."""
    max_facts: int = Field(default=1000, ge=1)
    """Facts in one case bundle."""
    max_criterion_ids: int = Field(default=100, ge=1)
    """`criterion_ids` in one evaluation request."""
    max_policy_nodes: int = Field(default=5000, ge=1, le=10_000)
    """Sections of one policy tree (node ids have four digits, so at most 10,000)."""
    max_policy_depth: int = Field(default=32, ge=1, le=200)
    """Nesting depth of one policy tree."""

    # --- auth ----------------------------------------------------------------------------------
    auth: Literal["on", "off"] = "on"
    """`on`: every /v1 route needs `Authorization: Bearer <key>` (create one with
    `reasoning-service api-key create`). `off` disables auth, with a warning at start-up."""
    metrics_auth: bool = False
    """Require a key on /metrics as well (/healthz and /readyz stay open)."""

    @field_validator("database_url")
    @classmethod
    def _check_database_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            return check_database_url(value)
        except ConfigError as exc:
            raise ValueError(f"REASONING_{exc}") from exc

    @property
    def store_url(self) -> str:
        """`database_url`, else the SQLite file `db_path`."""
        return self.database_url or f"sqlite:///{self.db_path}"

    @field_validator("controller")
    @classmethod
    def _check_controller(cls, value: str) -> str:
        try:
            return check_controller_mode(value)
        except ConfigError as exc:
            raise ValueError(f"REASONING_{exc}") from exc

    def secret_values(self) -> list[str]:
        """The configured provider keys in plain text, for masking wherever text leaves us.

        Keys shorter than 8 characters are left out: masking them would garble ordinary text."""
        keys = (self.llm_api_key, self.reflection_api_key, self.review_link_secret)
        values = (key.get_secret_value() for key in keys if key is not None)
        return [value for value in values if len(value) >= 8]

    def reflection_settings(self) -> Settings:
        """These settings with the LLM fields of the reflection model, when one is configured."""
        if self.reflection_provider is None:
            return self
        return self.model_copy(
            update={
                "llm_provider": self.reflection_provider,
                "llm_model": self.reflection_model or self.llm_model,
                "llm_base_url": self.reflection_base_url,
                "llm_api_key": self.reflection_api_key,
            }
        )

    @property
    def effective_atom_prompt_id(self) -> str:
        if self.atom_prompt_id is not None:
            return self.atom_prompt_id
        return "atoms-local-v1" if self.llm_provider == "local" else "atoms-v1"

    @property
    def effective_atom_answer_format(self) -> AtomAnswerFormat:
        if self.atom_answer_format is not None:
            return self.atom_answer_format
        return "json_schema" if self.llm_provider == "local" else "tool"

    @property
    def effective_atom_check_yes(self) -> bool:
        if self.atom_check_yes is not None:
            return self.atom_check_yes
        return self.llm_provider == "local"

    @property
    def effective_atom_ask_decided(self) -> bool:
        if self.atom_ask_decided is not None:
            return self.atom_ask_decided
        return self.llm_provider != "local"

    @property
    def effective_atom_model_kinds(self) -> frozenset[AtomKind]:
        if self.atom_model_kinds is not None:
            return frozenset(self.atom_model_kinds)
        if self.llm_provider == "local":
            return frozenset({"finding", "category"})
        return frozenset(get_args(AtomKind))

    @property
    def effective_tool_calling_mode(self) -> ToolCallingMode:
        """The configured mode, or the one that measured best for the provider."""
        if self.tool_calling_mode is not None:
            return self.tool_calling_mode
        return "forced" if self.llm_provider == "local" else "native"
