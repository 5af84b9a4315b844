"""A sources file the server cannot read loses no alert: the hook answers 503, which
Alertmanager retries (a 4xx it drops as unrecoverable), until the file is fixed. In this
process: a SQLite store for the token, the app under Starlette's test client."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api import ApiSettings, create_app
from pipeline.store import open_store
from pipeline.tokens import hash_secret, new_secret
from tests.api.test_alert_hook import alertmanager


@pytest.mark.parametrize("content", [
    pytest.param("[tenants.\"team-a\".alerts\ndefault_source = 1", id="not-toml"),
    pytest.param("[tenants.\"team-a\".alerts]\nwindow = \"forever\"", id="not-the-schema"),
])
def test_a_broken_sources_file_is_a_503_alertmanager_retries(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: str) -> None:
    config = tmp_path / "config.toml"
    config.write_text(content, encoding="utf-8")
    monkeypatch.setenv("VERITY_CONFIG", str(config))
    store = open_store(f"sqlite:///{tmp_path / 'tokens.db'}")
    secret = new_secret()
    store.create_token(token_id="t1", tenant_id="team-a", name="test",
                       secret_sha256=hash_secret(secret))

    def factory(tenant: str) -> Any:
        return SimpleNamespace(runtime=SimpleNamespace(store=store), tenant=tenant)

    app = create_app(factory, ApiSettings(runs_per_minute=10, max_body_bytes=65536))
    try:
        with TestClient(app, raise_server_exceptions=False) as http:
            answer = http.post("/hooks/alertmanager", json=alertmanager(),
                               headers={"authorization": f"Bearer {secret}"})
        assert answer.status_code == 503
        (error,) = answer.json().values()
        assert list(answer.json()) == ["error"] and "\n" not in error
        assert error.startswith(f"sources file {config}")
        assert store.list_alert_groups(tenant_id="team-a", limit=10) == []
    finally:
        store.close()
