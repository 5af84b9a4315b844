"""The import rules of the house, checked on the source tree itself (ruff's TID251 enforces them
too; this test also covers what banned-api cannot scope, such as which single module may
import anthropic), and the shape of the import graph: no two modules import each other, no
import runs back up the declared layers (LAYERS), no private name is imported across modules.
Violations owned by work in progress elsewhere are listed in KNOWN_*; the lists only shrink."""

from __future__ import annotations

import ast
from collections.abc import Callable
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
    assert {"pipeline/rules/gatekeeper.py", "pipeline/store/sql.py",
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


# --- The import graph: no circles, nothing back up a layer, no private name across modules ---

PACKAGES = ("models", "pipeline", "tasks", "cli", "api", "fake_anthropic")

LAYERS: tuple[tuple[str, ...], ...] = (
    ("models", "fake_anthropic"),
    ("pipeline", "pipeline.errors"),
    ("pipeline.config", "pipeline.serialization",
     "pipeline.package_data", "pipeline.tokens"),
    ("pipeline.ids", "pipeline.prompts"),
    ("pipeline.model",),
    ("pipeline.telemetry",),
    ("pipeline.store",),
    ("pipeline.rules", "pipeline.data"),
    ("pipeline.scenarios", "pipeline.importers"),
    ("pipeline.sources", "pipeline.tools"),
    ("pipeline.alerting",),
    ("pipeline.notify",),
    ("pipeline.run.cancellation",),
    ("pipeline.providers",),
    ("pipeline.run.attempts",),
    ("pipeline.agents",),
    ("pipeline.run",),
    ("pipeline.factory",),
    ("pipeline.inprocess",),
    ("pipeline.verification",),
    ("pipeline.reverify", "pipeline.checks"),
    ("tasks",),
    ("client",),
    ("api",),
    ("cli",),
)
"""The layers, lowest first. A module may import from its own group (the longest prefix that
names it) and from any lower layer; never from a higher layer, nor from another group of its
own layer (siblings stay apart).

- `models` (the typed contracts, data only) beside `fake_anthropic` (a test double of the
  provider's HTTP API): neither imports anything of Verity's above.
- foundations: the `pipeline` package itself (its `__init__` only; its modules are placed one
  by one, see SPLIT), errors, settings, serialization, package data, token hashing; then ids (which
  raise InputError) and prompts (read from package data).
- `pipeline.store`: persistence; it converts rows to contracts and knows nothing above.
- `pipeline.rules` (pure deterministic rules) beside `pipeline.data` (incident records, the
  `DataSource` protocol and its queries, the runbook index): neither reads the other.
- `pipeline.scenarios`: shipped scenario folders, read into records; beside it
  `pipeline.importers`: other agents' runs read into bundles (over the rules).
- `pipeline.sources` (implement `DataSource`) beside `pipeline.tools` (call it).
- `pipeline.alerting`: an alert notification to a run's question, source and group (pure, over
  the sources file's tenant routing).
- `pipeline.notify`: announces released runs to the targets the sources file configures.
- the model-call plumbing, each piece below its users: `run.cancellation` (the providers
  abandon a cancelled call), `pipeline.providers`, `run.attempts` (retries and attempt rows
  around any model), then `pipeline.agents` built on all of them.
- `pipeline.run`: the graph, its nodes and the runtime, driving agents, tools and the store.
- the pipeline's entry points, each over the previous: `factory` (wires agents, providers and
  sources), `inprocess` (drives the graph in memory), `verification` (`verity verify`),
  `reverify` (batches of verifications).
- `tasks` (celery), then `api` (enqueues through tasks' client), then `cli` (serves the api).
"""

SPLIT = {"pipeline"}
"""Groups that name only their package's `__init__`, not every module under it."""

KNOWN_CIRCLES: set[tuple[str, str]] = set()
"""Circles left to fix elsewhere; each entry must still occur, so the list only shrinks."""

KNOWN_BACK_UP: set[tuple[str, str]] = set()
"""Imports back up a layer left to fix elsewhere; each entry must still occur."""

KNOWN_PRIVATE: set[tuple[str, str]] = set()
"""Private names imported across modules left to fix elsewhere; each entry must still occur."""


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in _sources(*PACKAGES)}


def _owner(name: str) -> str | None:
    """The module of the graph that `name` (a module or a name inside one) belongs to."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imported(module: str, node: ast.Import | ast.ImportFrom) -> list[tuple[str, str | None]]:
    """(module imported, name taken from it or None for a whole module) of one statement."""
    if isinstance(node, ast.Import):
        return [(owner, None) for alias in node.names if (owner := _owner(alias.name))]
    base = node.module or ""
    if node.level:
        package = module.split(".")
        if MODULES[module].name != "__init__.py":
            package = package[:-1]
        package = package[: len(package) - node.level + 1]
        base = ".".join([*package, *([node.module] if node.module else [])])
    found: list[tuple[str, str | None]] = []
    for alias in node.names:
        if f"{base}.{alias.name}" in MODULES:
            found.append((f"{base}.{alias.name}", None))
        elif owner := _owner(base):
            found.append((owner, alias.name))
    return found


def _graph() -> list[tuple[str, str, str | None]]:
    """Every import between modules of the packages, at any depth (in functions and
    TYPE_CHECKING blocks too): (importer, imported, name or None)."""
    edges = []
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import | ast.ImportFrom):
                edges.extend((module, target, name) for target, name in _imported(module, node)
                             if target != module)
    return edges


GRAPH = _graph()


Edge = tuple[str, str, str | None]


def _circles(graph: list[Edge]) -> set[tuple[str, str]]:
    pairs = {(a, b) for a, b, _ in graph}
    return {(a, b) for a, b in pairs if (b, a) in pairs and a < b}


def _place(module: str) -> tuple[int, str]:
    """(layer index, group) of a module: the longest prefix of LAYERS that names it."""
    matches = [(len(group), index, group) for index, layer in enumerate(LAYERS)
               for group in layer
               if module == group or (group not in SPLIT and module.startswith(group + "."))]
    assert matches, f"{module} is in no layer: add it to LAYERS"
    _, index, group = max(matches)
    return index, group


def _back_up(graph: list[Edge]) -> set[tuple[str, str]]:
    found = set()
    for importer, imported, _ in graph:
        (low, group), (high, other) = _place(importer), _place(imported)
        if high > low or (high == low and group != other):
            found.add((importer, imported))
    return found


def _private(graph: list[Edge]) -> set[tuple[str, str]]:
    return {(importer, f"{imported}.{name}") for importer, imported, name in graph
            if name and name.startswith("_") and not name.startswith("__")}


def test_layering__the_graph_is_read() -> None:
    pairs = {(a, b) for a, b, _ in GRAPH}
    assert ("pipeline.tools.builtin", "pipeline.tools.registry") in pairs
    assert ("api.app", "api.routes") in pairs
    assert ("pipeline.store.sql", "pipeline.store.batches") in pairs
    assert ("pipeline.verification", "pipeline.errors", "BundleTooDeepError") in GRAPH


def test_layering__each_rule_catches_its_violation() -> None:
    probe: list[Edge] = [
        ("pipeline.tools.logs", "pipeline.tools.views", None),
        ("pipeline.tools.views", "pipeline.tools.logs", "iso"),
        ("pipeline.rules.actions", "pipeline.tools.builtin", "SEARCH_RUNBOOKS"),
        ("pipeline.tools.logs", "pipeline.sources.loki", None),
        ("api.app", "api.routes", "_helper"),
        ("pipeline.run.graph", "pipeline.rules.routing", "Node"),
    ]
    assert _circles(probe) == {("pipeline.tools.logs", "pipeline.tools.views")}
    assert _back_up(probe) == {("pipeline.rules.actions", "pipeline.tools.builtin"),
                               ("pipeline.tools.logs", "pipeline.sources.loki")}
    assert _private(probe) == {("api.app", "api.routes._helper")}


def test_layering__every_module_has_a_layer() -> None:
    for module in MODULES:
        _place(module)


def test_layering__no_two_modules_import_each_other() -> None:
    assert _circles(GRAPH) - KNOWN_CIRCLES == set()


def test_layering__no_import_runs_back_up_a_layer() -> None:
    assert _back_up(GRAPH) - KNOWN_BACK_UP == set()


def test_layering__no_private_name_is_imported_across_modules() -> None:
    assert _private(GRAPH) - KNOWN_PRIVATE == set()


@pytest.mark.parametrize(("known", "found"), [
    (KNOWN_CIRCLES, _circles), (KNOWN_BACK_UP, _back_up), (KNOWN_PRIVATE, _private),
], ids=["circles", "back-up", "private"])
def test_layering__a_known_violation_that_is_fixed_leaves_its_list(
    known: set[tuple[str, str]], found: Callable[[list[Edge]], set[tuple[str, str]]],
) -> None:
    assert known - found(GRAPH) == set(), "fixed: remove it from the KNOWN list"


def test_layering__no_private_name_is_imported_in_tests_benches_or_tools() -> None:
    """Tests, benchmarks, the fake Messages API and the scripts share helpers by public names
    too (a test that reaches into another module's private helper breaks when it is renamed)."""
    found = []
    for path in _sources("tests", "bench", "fake_anthropic", "scenarios", "scripts"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                found += [f"{_rel(path)}: {node.module}.{alias.name}" for alias in node.names
                          if alias.name.startswith("_") and not alias.name.startswith("__")]
    assert found == []
