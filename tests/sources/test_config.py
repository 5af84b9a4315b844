"""The sources file: where it is, what it may say, and one-line errors for what it may not."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.errors import ConfigurationError
from pipeline.sources.config import (
    BasicAuth,
    BearerAuth,
    PrometheusBackend,
    VerityConfig,
    config_path,
    load_config,
)

FULL = """
default_source = "prod"

[sources.prod]
description = "Production"

[sources.prod.prometheus]
url = "https://prometheus.internal:9090/"
auth = { type = "bearer", token_env = "PROM_TOKEN" }
service_selector = 'service="{service}"'
alerts = false

[sources.prod.alertmanager]
url = "http://alertmanager:9093"

[sources.prod.loki]
url = "https://loki.internal"
headers = { "X-Scope-OrgID" = "team-a" }
auth = { type = "basic", username_env = "LOKI_USER", password_env = "LOKI_PASSWORD" }

[sources.prod.kubernetes]
url = "https://k8s.internal:6443"
namespaces = ["shop", "payments"]
auth = { type = "bearer", token_file = "/var/run/secrets/token" }
tls = { ca_file = "/etc/ca.pem" }

[sources.prod.runbooks]
path = "runbooks"

[sources.demo]
scenario = "checkout-pool-exhaustion"
"""


def _write(tmp_path: Path, text: str) -> Path:
    file = tmp_path / "config.toml"
    file.write_text(text, encoding="utf-8")
    return file


def test_load__a_full_file(tmp_path: Path) -> None:
    config = load_config(_write(tmp_path, FULL))
    assert list(config.sources) == ["prod", "demo"] and config.default_source == "prod"
    prod = config.sources["prod"]
    assert prod.prometheus is not None and prod.prometheus.url == \
        "https://prometheus.internal:9090"
    assert isinstance(prod.prometheus.auth, BearerAuth) and not prod.prometheus.alerts
    assert prod.loki is not None and prod.loki.headers == {"X-Scope-OrgID": "team-a"}
    assert isinstance(prod.loki.auth, BasicAuth)
    assert prod.kubernetes is not None and prod.kubernetes.namespaces == ("shop", "payments")
    assert prod.kubernetes.tls.ca_file == "/etc/ca.pem"
    assert config.sources["demo"].scenario == "checkout-pool-exhaustion"
    assert config.path == str(tmp_path / "config.toml")


def test_defaults__the_documented_service_selectors() -> None:
    prometheus = PrometheusBackend(url="http://p:9090")
    assert prometheus.service_selector == 'job="{service}"' and prometheus.alerts
    config = load_config_text('[sources.x.loki]\nurl = "http://l"\n'
                              '[sources.x.kubernetes]\nurl = "http://k"\n')
    x = config.sources["x"]
    assert x.loki is not None and x.loki.service_selector == '{app="{service}"}'
    assert x.kubernetes is not None and x.kubernetes.service_selector == "app={service}"
    assert x.kubernetes.namespaces == ("default",)


def load_config_text(text: str) -> VerityConfig:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        return load_config(_write(Path(folder), text))


@pytest.mark.parametrize(("text", "message"), [
    pytest.param("[sources.x\n", "is not TOML", id="not-toml"),
    pytest.param('[sources.x]\nscenario = "a"\n[sources.x.loki]\nurl = "http://l"\n',
                 "either a scenario or a set of backends", id="scenario-and-backends"),
    pytest.param("[sources.x]\ndescription = 'nothing'\n", "needs a scenario or at least one",
                 id="empty-source"),
    pytest.param('[sources.Prod]\nscenario = "a"\n', "is not lower-case", id="bad-name"),
    pytest.param('default_source = "nope"\n[sources.x]\nscenario = "a"\n',
                 "not a configured source", id="unknown-default"),
    pytest.param('[sources.x.prometheus]\nurl = "prometheus:9090"\n', "sources.x.prometheus.url",
                 id="url-without-scheme"),
    pytest.param('[sources.x.prometheus]\nurl = "http://p"\nauth = { type = "bearer" }\n',
                 "exactly one of token_env or token_file", id="bearer-without-token"),
    pytest.param('[sources.x.loki]\nurl = "http://l"\npassword = "hunter2"\n',
                 "sources.x.loki.password: Extra inputs",
                 id="unknown-key"),
    pytest.param('[sources.x.prometheus]\nurl = "http://p"\ntimeout_s = 0\n', "timeout_s",
                 id="zero-timeout"),
])
def test_load__a_bad_file_is_one_line_naming_the_problem(
    tmp_path: Path, text: str, message: str
) -> None:
    with pytest.raises(ConfigurationError) as raised:
        load_config(_write(tmp_path, text))
    assert message in str(raised.value) and "\n" not in str(raised.value)
    assert str(tmp_path / "config.toml") in str(raised.value)


def test_load__a_named_file_that_is_missing_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="does not exist"):
        load_config(tmp_path / "nope.toml")


def test_path__verity_config_else_xdg_else_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("VERITY_CONFIG", raising=False)
    assert config_path() == tmp_path / "xdg" / "verity" / "config.toml"
    assert load_config().sources == {}  # no file at the default place: nothing configured
    monkeypatch.setenv("VERITY_CONFIG", str(tmp_path / "mine.toml"))
    assert config_path() == tmp_path / "mine.toml"
    with pytest.raises(ConfigurationError, match="does not exist"):
        load_config()  # named explicitly, so its absence is an error
    monkeypatch.delenv("VERITY_CONFIG")
    monkeypatch.delenv("XDG_CONFIG_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert config_path() == tmp_path / "home" / ".config" / "verity" / "config.toml"
