"""The sources file: named data sources, each a set of backends (TOML).

The file is `$VERITY_CONFIG`, else `$XDG_CONFIG_HOME/verity/config.toml` (default
`~/.config/verity/config.toml`); without one, only the shipped scenarios exist as sources
(`scenario:NAME`). Credentials are never in the file: it names the environment variables (or
files) that hold them.

    [sources.prod.prometheus]
    url = "https://prometheus.internal:9090"
    auth = { type = "bearer", token_env = "PROM_TOKEN" }
    service_selector = 'job="{service}"'

    [sources.prod.loki]
    url = "https://loki.internal"
    headers = { "X-Scope-OrgID" = "team-a" }

    [sources.demo]
    scenario = "checkout-pool-exhaustion"

    [tenants."team-a"]
    notify = [
      { type = "slack", url_env = "SLACK_WEBHOOK_URL", when = ["PASS", "LOW_CONFID"] },
      { type = "webhook", url = "https://hooks.internal/verity",
        secret_env = "VERITY_WEBHOOK_SECRET", when = "always" },
    ]

Service to selector (a tool's `service` argument on each backend), overridable per backend:

    Prometheus     service_selector = 'job="{service}"'   service_label = "job"
    Loki           service_selector = '{app="{service}"}' service_label = "app"
                   (all services: all_selector = '{app=~".+"}')
    Alertmanager   service_label = "service"
    Kubernetes     namespaces = ["default"], service_selector = "app={service}"

Relative paths (a scenario folder, the runbook folder) are read from the file's folder.

Alerts (`POST /hooks/alertmanager`) start runs of a tenant on the source its routes pick:

    [tenants."team-a".alerts]
    window = "4h"              # the same group firing again within it starts nothing new
    max_runs_per_hour = 20     # above it a group is recorded "skipped", never dropped silently
    default_source = "prod"    # when no route matches (none: the alert is refused)
    routes = [
      { match = { cluster = "prod", severity = "page" }, source = "prod" },
      { match = { cluster = "staging" }, source = "staging" },
    ]

A route matches when every one of its labels equals the alert group's label of that name (the
group's common labels, else its first alert's); the first route that matches wins. Sources are
names of `[sources]` (or `scenario:NAME`); an unknown one is a configuration error.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from pipeline.errors import ConfigurationError, InputError
from pipeline.ids import check_tenant_id

SOURCE_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
"""A configured source's name: lower-case letters, digits, `-` and `_`, at most 63 chars."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BearerAuth(_Strict):
    """`Authorization: Bearer <token>`, the token read from `token_env` or `token_file`."""

    type: Literal["bearer"]
    token_env: str | None = Field(default=None, description="Variable holding the token.")
    token_file: str | None = Field(
        default=None, description="File holding the token (e.g. a service-account token).")

    @model_validator(mode="after")
    def _one_place(self) -> BearerAuth:
        if (self.token_env is None) == (self.token_file is None):
            raise ValueError("bearer auth needs exactly one of token_env or token_file")
        return self


class BasicAuth(_Strict):
    """HTTP basic auth, user and password read from environment variables."""

    type: Literal["basic"]
    username_env: str = Field(description="Variable holding the user name.")
    password_env: str = Field(description="Variable holding the password.")


Auth = Annotated[BearerAuth | BasicAuth, Field(discriminator="type")]


class TLS(_Strict):
    """TLS options of one backend."""

    verify: bool = Field(default=True, description="Verify the server's certificate.")
    ca_file: str | None = Field(default=None, description="CA bundle to verify against.")
    cert_file: str | None = Field(default=None, description="Client certificate (mTLS).")
    key_file: str | None = Field(default=None, description="Client key (mTLS).")


class Backend(_Strict):
    """What every HTTP backend has: where it is, how long to wait, how to authenticate."""

    url: str = Field(pattern=r"^https?://", description="Base URL, http:// or https://.")
    timeout_s: float = Field(default=10.0, gt=0, le=300, description="Per-request timeout.")
    connect_timeout_s: float = Field(default=3.0, gt=0, le=60, description="Connect timeout.")
    headers: dict[str, str] = Field(default_factory=dict,
                                    description="Extra headers, e.g. X-Scope-OrgID.")
    auth: Auth | None = None
    tls: TLS = Field(default_factory=TLS)
    max_bytes: int = Field(default=16 * 1024 * 1024, ge=1024,
                           description="Largest response body read; beyond it the call fails.")

    @field_validator("url")
    @classmethod
    def _no_trailing_slash(cls, value: str) -> str:
        return value.rstrip("/")


class PrometheusBackend(Backend):
    """Metrics (`query_range`) and, through the `ALERTS` series and `/api/v1/alerts`, alerts."""

    service_selector: str = Field(
        default='job="{service}"',
        description="Label matchers selecting one service's series; {service} is replaced.")
    service_label: str = Field(
        default="job", description="The label whose value is the service, on returned series.")
    step_s: int = Field(default=60, ge=1, le=3600, description="query_range resolution.")
    units: dict[str, str] = Field(
        default_factory=dict,
        description="Unit by metric name; else guessed from the name's suffix (_seconds, ...).")
    alerts: bool = Field(default=True, description="Answer list_alerts when no Alertmanager.")
    summary_annotations: tuple[str, ...] = Field(
        default=("summary", "description"), description="Annotations read as the summary.")


class AlertmanagerBackend(Backend):
    """Alerts through the Alertmanager v2 API."""

    service_label: str = Field(default="service", description="Label naming the service.")
    summary_annotations: tuple[str, ...] = Field(
        default=("summary", "description"), description="Annotations read as the summary.")


class LokiBackend(Backend):
    """Logs through LogQL `query_range` (lines) and a `count_over_time` query (totals)."""

    service_selector: str = Field(
        default='{app="{service}"}',
        description="Stream selector of one service; {service} is replaced.")
    all_selector: str = Field(default='{app=~".+"}', description="Selector of all services.")
    service_label: str = Field(default="app", description="Stream label naming the service.")
    level_label: str = Field(default="level", description="Label (or JSON field) of the level.")
    pod_label: str = Field(default="pod", description="Stream label naming the pod.")
    trace_label: str = Field(
        default="trace_id",
        description="Label (structured metadata, or JSON field) holding the trace id.")
    json_lines: bool = Field(
        default=False, description="Lines are JSON objects: message/level/trace_id fields.")
    max_entries_per_query: int = Field(
        default=5000, ge=1, le=100_000,
        description="Lines asked per request: the server's max_entries_limit_per_query.")


class KubernetesBackend(Backend):
    """Events and Deployment/ReplicaSet rollout history through the Kubernetes API."""

    namespaces: tuple[str, ...] = Field(
        default=("default",), description="Namespaces to read; a service's objects live there.")
    service_selector: str = Field(
        default="app={service}", description="Label selector of one service's objects.")
    version_annotation: str | None = Field(
        default=None, description="Annotation holding the version; default the image tag.")
    author_annotation: str | None = Field(
        default=None, description="Annotation naming who deployed.")
    page_size: int = Field(
        default=500, ge=1, le=10_000, description="Items asked per list request (`limit`).")


class RunbookFolder(_Strict):
    """A folder of Markdown runbooks (front matter: doc_id, title)."""

    path: str = Field(min_length=1, description="Folder of *.md runbooks.")


class SourceConfig(_Strict):
    """One named source: a scenario, or a set of backends."""

    scenario: str | None = Field(
        default=None, description="A shipped scenario's name or a scenario folder's path.")
    prometheus: PrometheusBackend | None = None
    alertmanager: AlertmanagerBackend | None = None
    loki: LokiBackend | None = None
    kubernetes: KubernetesBackend | None = None
    runbooks: RunbookFolder | None = None
    description: str = Field(default="", description="Shown by `verity sources`.")

    @model_validator(mode="after")
    def _something(self) -> SourceConfig:
        backends = [self.prometheus, self.alertmanager, self.loki, self.kubernetes,
                    self.runbooks]
        if self.scenario is not None and any(b is not None for b in backends):
            raise ValueError("a source is either a scenario or a set of backends, not both")
        if self.scenario is None and all(b is None for b in backends):
            raise ValueError("a source needs a scenario or at least one backend")
        return self


LABEL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
"""A Prometheus label name, as a route's matcher names it."""

_DURATION = re.compile(r"^(\d{1,6})(s|m|h|d)$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def duration_s(text: str) -> int:
    """Seconds of a duration written `30s`, `15m`, `4h` or `1d`; ValueError otherwise."""
    found = _DURATION.match(text.strip())
    if found is None:
        raise ValueError(f"duration {text!r} is not a number and a unit (s, m, h, d), e.g. 4h")
    return int(found.group(1)) * _UNIT_S[found.group(2)]


class AlertRoute(_Strict):
    """One routing rule: alerts whose labels equal every matcher start runs on `source`."""

    match: dict[str, str] = Field(
        min_length=1, description="Label name to the value it must equal (all must).")
    source: str = Field(min_length=1, description="The source a matching alert's run reads.")

    @field_validator("match")
    @classmethod
    def _label_names(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            if not LABEL_NAME.match(name):
                raise ValueError(f"matcher {name!r} is not a label name")
        return value


class AlertRouting(_Strict):
    """How a tenant's alerts start runs: which source, how often, how many."""

    window: str = Field(default="4h", description="Same group again within it: no new run.")
    max_runs_per_hour: int = Field(
        default=20, ge=1, le=100_000, description="Runs alerts may start per hour; above it "
        "a group is recorded skipped.")
    routes: tuple[AlertRoute, ...] = Field(default=(), description="First match wins.")
    default_source: str | None = Field(default=None, description="When no route matches.")

    @field_validator("window")
    @classmethod
    def _window(cls, value: str) -> str:
        duration_s(value)
        return value

    @property
    def window_s(self) -> int:
        """The window in seconds."""
        return duration_s(self.window)

    def sources(self) -> list[str]:
        """Every source the routing names."""
        named = [route.source for route in self.routes]
        return named + ([self.default_source] if self.default_source else [])


NotifyOn = Literal["PASS", "LOW_CONFID", "REJECT", "FALLBACK"]
"""A released run's verdict (PASS, LOW_CONFID, REJECT) or FALLBACK (a run that fell back)."""


class _Target(_Strict):
    """What every notification target has: when it is sent, how long a POST may take, and
    how often it is tried before the delivery is FAILED."""

    when: Literal["always", "alert"] | tuple[NotifyOn, ...] = Field(
        description='Which released runs notify: "always", "alert" (runs an alert started), '
        'or a list of verdicts and FALLBACK, e.g. ["PASS", "LOW_CONFID"].')
    timeout_s: float = Field(
        default=10.0, gt=0, le=30,
        description="Per-POST timeout; keep VERITY_NOTIFY_LEASE_S at least twice it.")
    max_attempts: int = Field(default=8, ge=1, le=50,
                              description="POSTs before the delivery is FAILED.")
    backoff_s: float = Field(
        default=2.0, gt=0, le=3600,
        description="Wait before the 2nd attempt; doubled each time (Retry-After wins).")

    @field_validator("when")
    @classmethod
    def _some(cls, value: str | tuple[str, ...]) -> str | tuple[str, ...]:
        if not value:
            raise ValueError("when needs at least one of PASS, LOW_CONFID, REJECT, FALLBACK")
        return value


class SlackTarget(_Target):
    """A Slack incoming webhook; its URL is a secret, read from `url_env`."""

    type: Literal["slack"]
    url_env: str = Field(min_length=1, description="Variable holding the webhook URL.")


class WebhookTarget(_Target):
    """A JSON webhook, each POST signed with HMAC-SHA256 by the secret in `secret_env`."""

    type: Literal["webhook"]
    url: str = Field(pattern=r"^https?://", description="Where to POST, http:// or https://.")
    secret_env: str = Field(min_length=1, description="Variable holding the signing secret.")


NotifyTarget = Annotated[SlackTarget | WebhookTarget, Field(discriminator="type")]


class TenantConfig(_Strict):
    """One tenant's on-call settings (`[tenants."<tenant id>"]`): which source a run an alert
    starts reads, and where its answer goes."""

    alerts: AlertRouting | None = Field(
        default=None, description="Alerts start runs (POST /hooks/alertmanager).")
    notify: tuple[NotifyTarget, ...] = Field(
        default=(), description="Where released runs of the tenant are announced.")


class VerityConfig(_Strict):
    """The whole file."""

    sources: dict[str, SourceConfig] = Field(default_factory=dict)
    tenants: dict[str, TenantConfig] = Field(
        default_factory=dict, description="On-call settings per tenant id.")
    default_source: str | None = Field(default=None, description="Used when a run names none.")
    path: str | None = Field(default=None, description="The file it was read from.")

    @field_validator("sources")
    @classmethod
    def _names(cls, value: dict[str, SourceConfig]) -> dict[str, SourceConfig]:
        for name in value:
            if not SOURCE_NAME.match(name):
                raise ValueError(f"source name {name!r} is not lower-case letters, digits, - _")
        return value

    @field_validator("tenants")
    @classmethod
    def _tenant_ids(cls, value: dict[str, TenantConfig]) -> dict[str, TenantConfig]:
        for tenant_id in value:
            try:
                check_tenant_id(tenant_id)
            except InputError as error:
                raise ValueError(str(error)) from None
        return value

    @model_validator(mode="after")
    def _default_exists(self) -> VerityConfig:
        if self.default_source is not None and self.default_source not in self.sources \
                and not self.default_source.startswith("scenario:"):
            raise ValueError(f"default_source {self.default_source!r} is not a configured source")
        for tenant_id, tenant in self.tenants.items():
            for name in tenant.alerts.sources() if tenant.alerts else ():
                if name not in self.sources and not name.startswith("scenario:"):
                    raise ValueError(f"tenants.{tenant_id}.alerts: source {name!r} is not a "
                                     "configured source")
        return self


def config_path() -> Path:
    """`$VERITY_CONFIG`, else `$XDG_CONFIG_HOME/verity/config.toml`."""
    explicit = os.environ.get("VERITY_CONFIG")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "verity" / "config.toml"


def load_config(path: str | Path | None = None) -> VerityConfig:
    """The sources file at `path` (default `config_path()`); an empty config when the default
    file does not exist. ConfigurationError (one line) for a file that is named but missing,
    is not TOML, or does not match the schema."""
    explicit = path is not None or bool(os.environ.get("VERITY_CONFIG"))
    file = Path(path).expanduser() if path is not None else config_path()
    if not file.is_file():
        if explicit:
            raise ConfigurationError(f"sources file {file} does not exist")
        return VerityConfig()
    try:
        raw = tomllib.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigurationError(f"sources file {file} cannot be read: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigurationError(f"sources file {file} is not TOML: {exc}") from None
    try:
        return VerityConfig.model_validate({**raw, "path": str(file)})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ConfigurationError(f"sources file {file}: {where}: {first['msg']}") from None


__all__ = [
    "LABEL_NAME",
    "SOURCE_NAME",
    "AlertRoute",
    "AlertRouting",
    "AlertmanagerBackend",
    "Backend",
    "BasicAuth",
    "BearerAuth",
    "KubernetesBackend",
    "LokiBackend",
    "NotifyOn",
    "NotifyTarget",
    "PrometheusBackend",
    "RunbookFolder",
    "SlackTarget",
    "SourceConfig",
    "TLS",
    "TenantConfig",
    "VerityConfig",
    "WebhookTarget",
    "config_path",
    "duration_s",
    "load_config",
]
