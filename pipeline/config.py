"""Settings, read from the environment (`VERITY_*`), and where the embedded database lives."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from pipeline.errors import ConfigurationError

LlmRole = Literal["planner", "executor", "verifier", "composer", "knowledge", "extractor"]
DEFAULT_MODELS: dict[str, str] = {
    "planner": "claude-sonnet-5-5",
    "executor": "claude-sonnet-5-5",
    "verifier": "claude-opus-5-5",
    "composer": "claude-sonnet-5-5",
    "knowledge": "claude-haiku-5-5",
    "extractor": "claude-sonnet-5-5",
}
"""Current defaults per role. The Verifier's judgement is the one the verdict rests on, so it gets
the strongest current model (Opus 5.5); the Planner, Executor and Composer get Sonnet 5.5 (fast,
strong at tool use); the knowledge answer is a short extraction from one lookup (Haiku 5.5); the
claim extractor copies a checked answer's claims exactly and reads their kind, which the
verdict's critical claims follow from (Sonnet 5.5)."""


class VeritySettings(BaseSettings):
    """Verity's settings; each field reads `VERITY_<NAME>` from the environment."""

    model_config = SettingsConfigDict(env_prefix="VERITY_", extra="ignore", populate_by_name=True)

    database_url: str | None = Field(
        default=None, description="SQLAlchemy URL; None means the default SQLite file."
    )
    broker_url: str | None = Field(
        default=None, description="Celery broker; None means the in-process memory:// worker."
    )
    result_backend: str | None = Field(default=None, description="Celery result backend.")
    tenant: str | None = Field(
        default=None,
        description="The producer's tenant (`VERITY_TENANT`): the owner of the runs it submits "
        "and the only one whose runs, sessions and previous turns it sees. `VerityClient` needs "
        "one (this or its `tenant=`); the CLI falls back to `default`.",
    )
    projection_max_bytes: int = Field(
        default=16384, gt=0, description="Upper bound of a stored projection, in bytes."
    )
    projection_max_items: int = Field(
        default=50, gt=0, description="Upper bound of items kept in a stored projection."
    )
    import_max_bytes: int = Field(
        default=16 * 1024 * 1024, gt=0,
        description="Largest file `verity import` and `verity check-answer` read (a transcript, "
        "a trace, an answer or an evidence file), in bytes.",
    )
    import_projection_max_items: int = Field(
        default=1000, gt=0,
        description="Most lines (of a text tool output) or items per list (of a JSON one) kept "
        "in an imported call's projection; what is cut is marked `truncated`.",
    )
    import_projection_max_bytes: int = Field(
        default=128 * 1024, gt=0,
        description="Upper bound of an imported call's projection, in bytes of JSON.",
    )
    runtime_factory: str | None = Field(
        default=None,
        description="`module:function` taking VeritySettings and returning a Runtime, for "
        "workers with other agents or tools (the runtime benchmark uses it).",
    )
    faults: str = Field(
        default="",
        description="Fault injection for tests and drills, comma-separated: "
        "`delay:<node>=<seconds>` sleeps before a node body, `raise:<tool>` makes a tool fail, "
        "`raise_node:<node>` makes a node's body fail (see pipeline/run/faults.py).",
    )

    # -- durable runs ------------------------------------------------------------------------
    run_deadline_s: float = Field(
        default=3600.0, gt=0,
        description="Seconds a run may take from submit to its end; past it the reconciler "
        "ends it FAILED (RUN_DEADLINE_EXCEEDED).",
    )
    reconcile_interval_s: float = Field(
        default=15.0, gt=0, description="Seconds between two reconciler sweeps (beat or loop)."
    )
    reconcile_stale_s: float = Field(
        default=60.0, gt=0,
        description="A PENDING or RUNNING run with no progress and no live lease for this long "
        "has its stored next step re-sent.",
    )
    message_batch_poll_s: float = Field(
        default=10.0, gt=0,
        description="How often a re-verification polls a Message Batch it sent (Anthropic "
        "ends most within minutes; the fake server in milliseconds).",
    )
    message_batch_timeout_s: float = Field(
        default=3600.0, gt=0,
        description="A Message Batch not ended after this long is cancelled and its requests "
        "fail as unavailable (then retried as the normal retry rules allow).",
    )
    reconcile_limit: int = Field(
        default=200, gt=0, description="Runs each kind of reconciler action handles per sweep."
    )
    public_url: str | None = Field(
        default=None, pattern=r"^https?://",
        description="Where the page is served for the team (`VERITY_PUBLIC_URL`): notifications "
        "link to `<url>/#/runs/<id>`; unset, they carry no link.",
    )
    notify_lease_s: float = Field(
        default=60.0, gt=0,
        description="How long one delivery attempt holds its claim (at least twice the "
        "target's timeout): a worker that dies mid-POST frees it after this.",
    )
    store_retry_budget_s: float = Field(
        default=120.0, ge=0,
        description="Seconds a task keeps retrying an unreachable database, counted from its "
        "message's first try; past it the task gives up and the reconciler finishes the run.",
    )

    # -- models ------------------------------------------------------------------------------
    provider: Literal["auto", "offline", "anthropic"] = Field(
        default="auto",
        description="Which agents run: `anthropic` (Claude), `offline` (deterministic), or "
        "`auto`: Claude when an API key is set, offline otherwise.",
    )
    anthropic_api_key: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("VERITY_ANTHROPIC_API_KEY", "ANTHROPIC_API_KEY"),
        description="API key for the Anthropic Messages API (`ANTHROPIC_API_KEY`).",
    )
    anthropic_base_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("VERITY_ANTHROPIC_BASE_URL", "ANTHROPIC_BASE_URL"),
        description="An Anthropic-compatible endpoint (gateway, local model server, the fake "
        "server in tests); None means the SDK's default.",
    )
    model_planner: str = Field(default=DEFAULT_MODELS["planner"], description="Planner model.")
    model_executor: str = Field(default=DEFAULT_MODELS["executor"], description="Executor model.")
    model_verifier: str = Field(default=DEFAULT_MODELS["verifier"], description="Verifier model.")
    model_composer: str = Field(default=DEFAULT_MODELS["composer"], description="Composer model.")
    model_knowledge: str = Field(
        default=DEFAULT_MODELS["knowledge"], description="Knowledge answerer model."
    )
    model_extractor: str = Field(
        default=DEFAULT_MODELS["extractor"],
        description="Claim extractor model (a checked answer's claims, with --provider anthropic).",
    )
    llm_timeout_s: float = Field(
        default=300.0, gt=0,
        description="Read/write/pool timeout of one model request, seconds (a thinking model "
        "writing 16k tokens needs minutes; a timeout is retried as transient).",
    )
    llm_connect_timeout_s: float = Field(
        default=5.0, gt=0, description="Connect timeout of one model request, seconds."
    )
    llm_max_tokens: int = Field(
        default=16000, gt=0, description="max_tokens of a model request (thinking included)."
    )
    llm_max_tokens_by_role: dict[str, int] = Field(
        default_factory=dict,
        description='Per-role max_tokens overrides, JSON: `{"executor": 32000}`.',
    )
    force_tool_choice: Literal["auto", "always", "never"] = Field(
        default="auto",
        description="Force the answer tool with `tool_choice`: `auto` forces it only for models "
        "that accept a forced tool choice (the 5.x Claude models refuse it; they get the tool "
        "with `tool_choice: auto` and an instruction, and a reply without it is invalid output).",
    )
    transient_retry_budget_s: float = Field(
        default=60.0, ge=0,
        description="Total seconds a call may spend backing off transient provider errors.",
    )
    transient_max_retries: int = Field(
        default=4, ge=0, description="Retries of one call after transient provider errors."
    )
    token_budget: int = Field(
        default=0, ge=0, description="Tokens (input + output + cache) per run; 0 = unlimited."
    )
    prices_file: Path | None = Field(
        default=None,
        description="JSON price table overriding the built-in one: "
        '`{"model-id": {"input": 2.0, "output": 10.0, "cache_write": 2.5, "cache_read": 0.1}}` '
        "in USD per million tokens.",
    )
    executor_max_turns: int = Field(
        default=4, ge=1,
        description="Tool turns the Executor may take; the last one must submit its evidence.",
    )
    executor_max_tool_calls: int = Field(
        default=8, ge=1, description="Tool calls the Executor may ask for in one turn."
    )
    executor_max_continuations: int = Field(
        default=2, ge=0, description="`pause_turn` continuations of one Executor turn."
    )

    # -- input limits ------------------------------------------------------------------------
    # What `load_bundle` accepts; anything over a limit is a one-line BundleError (exit 2).
    bundle_max_bytes: int = Field(
        default=4 * 1024 * 1024, gt=0, description="Largest bundle, in UTF-8 bytes."
    )
    bundle_max_depth: int = Field(
        default=64, gt=0,
        description="Deepest JSON nesting of a bundle and of its executor_output_raw.",
    )
    bundle_max_invocations: int = Field(
        default=256, gt=0, description="Most tool invocations in a bundle."
    )
    bundle_max_claims: int = Field(
        default=2000, gt=0, description="Most claims in a bundle's Executor output."
    )
    bundle_max_bindings: int = Field(
        default=8000, gt=0,
        description="Most evidence bindings over all claims of a bundle's Executor output.",
    )
    query_max_chars: int = Field(
        default=4000, gt=0, description="Longest query of a bundle, in characters."
    )
    executor_output_max_bytes: int = Field(
        default=512 * 1024, gt=0,
        description="Largest executor_output_raw of a bundle, in UTF-8 bytes (the post-check "
        "reads every claim's text several times: this bounds its time).",
    )
    executor_text_max_chars: int = Field(
        default=4000, gt=0,
        description="Longest string inside the Executor output (a claim's text, a matched_text, "
        "a hypothesis, an action), in characters.",
    )
    input_projection_max_bytes: int = Field(
        default=256 * 1024, gt=0,
        description="Largest stored projection a bundle may carry, in bytes of JSON.",
    )
    input_projection_max_depth: int = Field(
        default=32, gt=0, description="Deepest nesting inside one stored projection."
    )
    path_max_length: int = Field(
        default=1024, gt=0, description="Longest evidence-binding path, in characters."
    )
    path_max_index_digits: int = Field(
        default=16, gt=0,
        description="Most digits of one index in an evidence-binding path (±(2^53 - 1) has "
        "16; a longer index fails the limit before any conversion).",
    )

    # -- leases ------------------------------------------------------------------------------
    lease_ttl_s: float = Field(
        default=30.0, gt=0,
        description="Seconds a node lease lasts unless renewed: how long a dead copy's node "
        "stays leased. At most half of `visibility_timeout` (`check_lease_settings`).",
    )
    lease_renew_s: float = Field(
        default=0.5, gt=0,
        description="Seconds between two renewals of a process's leases (one statement); also "
        "how soon a running model call sees its run cancelled. At most half of the TTL.",
    )
    visibility_timeout: float = Field(
        default=600.0, gt=0,
        description="Seconds before the broker redelivers an unacked message of a dead worker "
        "(`VERITY_VISIBILITY_TIMEOUT`, which celeryconfig.py reads too).",
    )

    def model_for(self, role: str) -> str:
        """The configured model of an agent role."""
        models = {"planner": self.model_planner, "executor": self.model_executor,
                  "verifier": self.model_verifier, "composer": self.model_composer,
                  "knowledge": self.model_knowledge, "extractor": self.model_extractor}
        return models[role]

    def max_tokens_for(self, role: str) -> int:
        """max_tokens for a role: its override, else the global value."""
        return self.llm_max_tokens_by_role.get(role, self.llm_max_tokens)

    def resolved_provider(self) -> Literal["offline", "anthropic"]:
        """`auto` resolves to `anthropic` iff an API key is set."""
        if self.provider == "auto":
            key = self.anthropic_api_key
            return "anthropic" if key is not None and key.get_secret_value() else "offline"
        return self.provider

    def node_delay(self, node: str) -> float:
        """Seconds to sleep before `node` runs (fault injection); 0 normally."""
        for kind, target, value in _faults(self.faults):
            if kind == "delay" and target == node:
                return float(value or 0)
        return 0.0

    def failing_tools(self) -> frozenset[str]:
        """Tools that must raise (fault injection); empty normally."""
        return frozenset(target for kind, target, _ in _faults(self.faults) if kind == "raise")

    def failing_nodes(self) -> frozenset[str]:
        """Nodes whose body must raise (fault injection); empty normally."""
        return frozenset(target for kind, target, _ in _faults(self.faults)
                         if kind == "raise_node")


def _faults(spec: str) -> list[tuple[str, str, str]]:
    faults = []
    for item in filter(None, (part.strip() for part in spec.split(","))):
        kind, _, rest = item.partition(":")
        target, _, value = rest.partition("=")
        faults.append((kind, target, value))
    return faults


def data_dir() -> Path:
    """`$VERITY_HOME`, else `${XDG_DATA_HOME:-~/.local/share}/verity`."""
    home = os.environ.get("VERITY_HOME")
    if home:
        return Path(home).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME") or "~/.local/share"
    return Path(xdg).expanduser() / "verity"


def default_database_url() -> str:
    """The embedded default: `sqlite:///<data dir>/verity.db` (the directory is not created)."""
    return f"sqlite:///{(data_dir() / 'verity.db').absolute()}"


def resolve_database_url(settings: VeritySettings) -> str:
    """The configured database URL, else the embedded default."""
    return settings.database_url or default_database_url()


def check_settings(settings: VeritySettings) -> None:
    """A producer with a broker must write where the workers read: ConfigurationError if
    VERITY_BROKER_URL is set without VERITY_DATABASE_URL (the embedded SQLite file would be
    this process's own)."""
    if settings.broker_url and not settings.database_url:
        raise ConfigurationError(
            "VERITY_BROKER_URL is set: also set VERITY_DATABASE_URL to the workers' database")
