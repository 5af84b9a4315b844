"""The import rules of the house, checked on the source tree itself (ruff's TID251 enforces them
too; this test also covers what banned-api cannot scope, such as which single module may
import anthropic)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CODE = ("pipeline", "models", "tasks", "client", "cli", "api")
ANTHROPIC_MODULE = "pipeline/providers/anthropic.py"
SQLALCHEMY_ALLOWED = ("pipeline/store/", "models/tables.py")


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def _sources(*folders: str) -> list[Path]:
    return sorted(p for folder in folders for p in (ROOT / folder).rglob("*.py"))


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def test_layering__tree_is_scanned() -> None:
    scanned = {_rel(p) for p in _sources(*CODE)}
    assert {"pipeline/rules/gatekeeper.py", "pipeline/store/_store.py",
            "models/tables.py"} <= scanned


@pytest.mark.parametrize("path", _sources("pipeline", "models"), ids=_rel)
def test_layering__pipeline_and_models_never_import_celery(path: Path) -> None:
    assert "celery" not in _imports(path)
    assert "kombu" not in _imports(path)


@pytest.mark.parametrize("path", [p for p in _sources("client") if p.name != "local.py"],
                         ids=_rel)
def test_layering__the_http_client_never_imports_celery(path: Path) -> None:
    assert not {"celery", "kombu", "tasks"} & _imports(path)


@pytest.mark.parametrize("path", _sources(*CODE), ids=_rel)
def test_layering__only_one_module_imports_anthropic(path: Path) -> None:
    if _rel(path) != ANTHROPIC_MODULE:
        assert "anthropic" not in _imports(path)


@pytest.mark.parametrize("path", _sources(*CODE), ids=_rel)
def test_layering__only_the_store_and_models_import_sqlalchemy(path: Path) -> None:
    if not _rel(path).startswith(SQLALCHEMY_ALLOWED):
        assert not {"sqlalchemy", "alembic"} & _imports(path)


def test_layering__a_banned_import_is_detected(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("import celery.canvas\nfrom sqlalchemy import select\n")
    assert {"celery", "sqlalchemy"} <= _imports(probe)
