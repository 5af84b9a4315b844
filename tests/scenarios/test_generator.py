"""The committed scenario files are exactly what `scenarios/generate.py` writes (stdlib only)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from pipeline.scenarios import default_scenarios_dir

SCENARIOS = default_scenarios_dir()
GENERATOR = SCENARIOS / "generate.py"


def _files(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.parent != root and "__pycache__" not in p.parts
    }


def test_generator__reproduces_the_committed_files_byte_for_byte(tmp_path: Path) -> None:
    completed = subprocess.run(
        [sys.executable, "-B", str(GENERATOR), str(tmp_path)], capture_output=True, text=True,
        timeout=120, check=False,
    )
    assert completed.returncode == 0, completed.stderr
    generated, committed = _files(tmp_path), _files(SCENARIOS)
    assert sorted(generated) == sorted(committed)
    stale = [name for name in generated if generated[name] != committed[name]]
    assert not stale, f"rerun scenarios/generate.py: {stale[:5]}"


def test_generator__uses_only_the_standard_library() -> None:
    local = {"runbook_library"}
    for source in (GENERATOR, SCENARIOS / "runbook_library.py"):
        tree = ast.parse(source.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module.split(".")[0]]
            for name in names:
                assert name in sys.stdlib_module_names or name in local, (source.name, name)
