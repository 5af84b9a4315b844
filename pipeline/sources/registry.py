"""Source references: what a run stores as its `source`, and how a worker turns one back
into a `DataSource`.

    scenario:checkout-pool-exhaustion          a shipped scenario, at its own `now`
    scenario:checkout-pool-exhaustion@2026-11-30T16:00:00Z   the same, asked at another time
    demo                                       a configured scenario source ([sources.demo])
    prod@2026-12-01T17:00:00Z                  configured backends, pinned when submitted
    /srv/verity/scenarios/checkout-500s        a scenario folder (older runs, --scenario-dir)

A live source's `now` is the time the question is about. Submit pins it (`at`, default the
submit time) into the reference, so every tool call of the run, and a re-run, sees the same
windows. Scenario sources keep their scenario's `now` unless a time is given.

A worker process keeps one `SourceRegistry` per sources file (`sources()`): configured sources
are built once (a connection pool per backend, shared by every run) and rebuilt when the file
changes (its modification time or size), only those whose table changed.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pipeline.data.records import iso
from pipeline.data.source import BackendStatus, DataSource
from pipeline.errors import ConfigurationError, InputError, UnknownSourceError
from pipeline.scenarios import (
    default_scenarios_dir,
    list_scenarios,
    load_scenario,
    scenario_path,
)
from pipeline.sources.composite import BackendFactory, ConfiguredSource, backend_configs
from pipeline.sources.config import SourceConfig, VerityConfig, config_path, load_config
from pipeline.sources.scenario import SCENARIO_PREFIX, ScenarioSource

KNOWN_NAMES_SHOWN = 12
"""An unknown name's message lists the known ones when there are at most this many."""


def _short(names: list[str]) -> str:
    return ", ".join(names) if len(names) <= KNOWN_NAMES_SHOWN else f"{len(names)} names"


@dataclass(frozen=True, slots=True)
class SourceRef:
    """A parsed reference: the source (name, `scenario:NAME` or folder) and the pinned time."""

    base: str
    at: datetime | None = None

    def __str__(self) -> str:
        return self.base if self.at is None else f"{self.base}@{iso(self.at)}"

    @property
    def is_path(self) -> bool:
        """A scenario folder rather than a name."""
        return is_path(self.base)


def is_path(text: str) -> bool:
    """Whether a reference names a folder (source names never hold `/`, `.` or `~` first)."""
    return os.sep in text or "/" in text or text.startswith((".", "~"))


def parse_reference(reference: str) -> SourceRef:
    """`base[@ISO time]`; InputError for a name with a time that is not ISO 8601 (a folder
    whose name holds `@` is read whole)."""
    base, sep, stamp = reference.strip().rpartition("@")
    if not sep:
        return SourceRef(reference.strip())
    try:
        return SourceRef(base, utc(datetime.fromisoformat(stamp)))
    except ValueError:
        if is_path(reference):
            return SourceRef(reference.strip())
        raise InputError(f"source reference {reference!r}: {stamp!r} is not an ISO 8601 "
                         "time") from None


def utc(moment: datetime) -> datetime:
    """A time in UTC, whole seconds (one without an offset is read as UTC)."""
    aware = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    return aware.replace(microsecond=0)


def parse_time(text: str) -> datetime:
    """An ISO 8601 time (`2026-12-01T17:00:00Z`) in UTC; InputError otherwise."""
    try:
        return utc(datetime.fromisoformat(text.strip()))
    except ValueError:
        raise InputError(f"{text!r} is not an ISO 8601 time (e.g. 2026-12-01T17:00:00Z)"
                         ) from None


@dataclass(frozen=True, slots=True)
class SourceInfo:
    """One line of `verity sources`."""

    name: str
    kind: str
    description: str = ""
    backends: tuple[tuple[str, str], ...] = ()
    scenario: str | None = None

    def as_json(self) -> dict[str, Any]:
        """The JSON `verity sources --json` prints."""
        return {"name": self.name, "kind": self.kind, "description": self.description,
                "backends": [{"backend": b, "url": u} for b, u in self.backends],
                "scenario": self.scenario}


@dataclass
class _Loaded:
    signature: tuple[Any, ...]
    config: VerityConfig | None = None
    error: ConfigurationError | None = None


@dataclass
class SourceRegistry:
    """The sources of one sources file (default `config_path()`) and the shipped scenarios.
    `factories` replace backend classes by table name (tests' fakes)."""

    path: Path = field(default_factory=config_path)
    explicit: bool = field(default_factory=lambda: bool(os.environ.get("VERITY_CONFIG")))
    factories: Mapping[str, BackendFactory] | None = None
    scenarios_dir: Path = field(default_factory=default_scenarios_dir)
    _loaded: _Loaded | None = field(default=None, init=False, repr=False)
    _sources: dict[str, ConfiguredSource] = field(default_factory=dict, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    # -- the file ----------------------------------------------------------------------------

    def config(self) -> VerityConfig:
        """The sources file as it is now (re-read when it changed); ConfigurationError (one
        line) for a broken one. No file at the default place: no configured sources."""
        signature = self._signature()
        with self._lock:
            loaded = self._loaded
            if loaded is None or loaded.signature != signature:
                loaded = self._loaded = self._read(signature)
            if loaded.error is not None:
                raise loaded.error
            assert loaded.config is not None
            return loaded.config

    def _signature(self) -> tuple[Any, ...]:
        try:
            stat = self.path.stat()
        except OSError:
            return ("missing",)
        return (stat.st_mtime_ns, stat.st_size)

    def _read(self, signature: tuple[Any, ...]) -> _Loaded:
        try:
            if signature == ("missing",) and not self.explicit:
                config = VerityConfig()
            else:
                config = load_config(self.path)
        except ConfigurationError as exc:
            return _Loaded(signature, error=exc)
        for name in list(self._sources):  # keep the pools of sources whose table is unchanged
            if config.sources.get(name) != self._sources[name].config:
                # dropped, not closed: a call in flight on another thread finishes on it
                del self._sources[name]
        return _Loaded(signature, config=config)

    @property
    def base_dir(self) -> Path:
        """Relative paths in the sources file are read from its folder."""
        return self.path.expanduser().resolve().parent

    # -- names -------------------------------------------------------------------------------

    def names(self) -> list[str]:
        """Configured names, then the shipped scenarios as `scenario:NAME`."""
        shipped = [SCENARIO_PREFIX + i.name for i in list_scenarios(self.scenarios_dir)]
        return [*self.config().sources, *shipped]

    def unknown(self, name: str) -> UnknownSourceError:
        """The one-line error for a name that is not a source, naming the known ones (the
        shipped scenarios for a `scenario:` name, else the configured names)."""
        shipped = [SCENARIO_PREFIX + i.name for i in list_scenarios(self.scenarios_dir)]
        if name.startswith(SCENARIO_PREFIX):
            return UnknownSourceError(f"unknown source {name!r} (shipped scenarios: "
                                      f"{_short(shipped) or 'none'})")
        configured = _short(list(self.config().sources)) or "none configured"
        return UnknownSourceError(
            f"unknown source {name!r} (known: {configured}; and scenario:NAME for the "
            f"{len(shipped)} shipped scenarios, see verity sources)")

    # -- submit ------------------------------------------------------------------------------

    def reference(self, source: str, *, at: datetime | None = None,
                  now: datetime | None = None) -> str:
        """The reference a run stores for `source` (a configured name, `scenario:NAME` or a
        scenario folder, optionally `@ISO`), checked now: UnknownSourceError (InputError) for
        a name that is not a source, InputError for a scenario that does not load,
        ConfigurationError for a broken sources file. Configured backends are pinned at `at`,
        else `now` (default the wall clock); scenarios only when `at` is given."""
        ref = parse_reference(source)
        if ref.at is not None and at is not None and ref.at != utc(at):
            raise InputError(f"source {source!r} names a time and so does at={iso(at)}")
        pinned = ref.at or (utc(at) if at is not None else None)
        if ref.is_path:
            return str(SourceRef(resolve_scenario(None, ref.base), pinned))
        if ref.base.startswith(SCENARIO_PREFIX):
            self._shipped(ref.base)
            return str(SourceRef(ref.base, pinned))
        config = self._configured(ref.base)
        if config.scenario is not None:
            load_scenario(self._scenario_folder(config.scenario))
            return str(SourceRef(ref.base, pinned))
        return str(SourceRef(ref.base, pinned or utc(now or datetime.now(UTC))))

    def default_reference(self, *, at: datetime | None = None,
                          now: datetime | None = None) -> str | None:
        """The reference of the sources file's `default_source`, or None without one."""
        default = self.config().default_source
        return None if default is None else self.reference(default, at=at, now=now)

    # -- workers -----------------------------------------------------------------------------

    def resolve(self, reference: str) -> DataSource:
        """The source a stored reference names, at its pinned time."""
        ref = parse_reference(reference)
        if ref.is_path:
            folder = Path(ref.base)
            return ScenarioSource(load_scenario(folder), name=ref.base, now=ref.at)
        if ref.base.startswith(SCENARIO_PREFIX):
            return ScenarioSource(load_scenario(self._shipped(ref.base)), name=ref.base,
                                  now=ref.at)
        config = self._configured(ref.base)
        if config.scenario is not None:
            scenario = load_scenario(self._scenario_folder(config.scenario))
            return ScenarioSource(scenario, name=ref.base, now=ref.at)
        source = self._source(ref.base, config)
        return source if ref.at is None else source.at(ref.at)

    def describe(self) -> list[SourceInfo]:
        """Every source: the configured ones, then the shipped scenarios."""
        infos = []
        for name, config in self.config().sources.items():
            if config.scenario is not None:
                infos.append(SourceInfo(name, "scenario", config.description,
                                        scenario=str(self._scenario_folder(config.scenario))))
                continue
            backends = [(kind, table.url) for kind, table in backend_configs(config).items()]
            if config.runbooks is not None:
                backends.append(("runbooks", str(self._runbook_folder(config))))
            infos.append(SourceInfo(name, "backends", config.description, tuple(backends)))
        for info in list_scenarios(self.scenarios_dir):
            infos.append(SourceInfo(SCENARIO_PREFIX + info.name, "scenario",
                                    info.title or info.error or "", scenario=info.path))
        return infos

    def check(self, name: str) -> list[BackendStatus]:
        """Each backend of the source probed (one status per backend); a scenario source is
        one status: whether its folder loads."""
        ref = parse_reference(name)
        if ref.is_path or ref.base.startswith(SCENARIO_PREFIX) \
                or self._configured(ref.base).scenario is not None:
            return [self._check_scenario(ref)]
        config = self._configured(ref.base)
        return self._source(ref.base, config).check()

    def close(self) -> None:
        """Close every backend made so far."""
        with self._lock:
            sources, self._sources = list(self._sources.values()), {}
        for source in sources:
            source.close()

    # -- helpers -----------------------------------------------------------------------------

    def _configured(self, name: str) -> SourceConfig:
        config = self.config().sources.get(name)
        if config is None:
            raise self.unknown(name)
        return config

    def _source(self, name: str, config: SourceConfig) -> ConfiguredSource:
        with self._lock:
            source = self._sources.get(name)
            if source is None:
                source = self._sources[name] = ConfiguredSource(
                    name, config, factories=self.factories, base_dir=self.base_dir)
            return source

    def _shipped(self, reference: str) -> Path:
        name = reference.removeprefix(SCENARIO_PREFIX)
        try:
            return scenario_path(name, self.scenarios_dir)
        except InputError:
            raise self.unknown(reference) from None

    def _scenario_folder(self, scenario: str) -> Path:
        if is_path(scenario):
            return (self.base_dir / Path(scenario).expanduser()).resolve()
        return scenario_path(scenario, self.scenarios_dir)

    def _runbook_folder(self, config: SourceConfig) -> Path:
        assert config.runbooks is not None
        return (self.base_dir / Path(config.runbooks.path).expanduser()).resolve()

    def _check_scenario(self, ref: SourceRef) -> BackendStatus:
        name = str(ref)
        try:
            source = self.resolve(name)
        except UnknownSourceError:
            raise
        except InputError as exc:
            return BackendStatus(source=name, backend="scenario", url="", reachable=False,
                                 detail=str(exc))
        assert isinstance(source, ScenarioSource)
        scenario = source.scenario
        detail = (f"{len(scenario.logs)} log lines, {len(scenario.series)} series, "
                  f"{len(scenario.alert_list)} alerts, {len(scenario.runbooks)} runbooks")
        return BackendStatus(source=name, backend="scenario", url=str(scenario.path),
                             reachable=True, detail=detail)


_REGISTRIES: dict[tuple[Path, bool], SourceRegistry] = {}
_REGISTRIES_LOCK = threading.Lock()


def sources() -> SourceRegistry:
    """This process's registry for the sources file `config_path()` names now."""
    key = (config_path(), bool(os.environ.get("VERITY_CONFIG")))
    with _REGISTRIES_LOCK:
        registry = _REGISTRIES.get(key)
        if registry is None:
            registry = _REGISTRIES[key] = SourceRegistry(path=key[0], explicit=key[1])
        return registry


def load_source(source: str | None) -> DataSource:
    """The runtime's source loader: the `DataSource` a run's stored reference names."""
    if source is None:
        raise InputError("this run has no data source (pass --source, --scenario or "
                         "--scenario-dir)")
    return sources().resolve(source)


def resolve_scenario(name: str | None, directory: str | None) -> str:
    """A scenario folder from `--scenario NAME` or `--scenario-dir PATH`, as an absolute path,
    checked now (InputError, one line, when it is missing or does not load)."""
    if not name and not directory:
        raise InputError("name a scenario with --scenario NAME or --scenario-dir PATH")
    if directory:
        path = Path(directory).expanduser().resolve()
    else:
        path = (default_scenarios_dir() / (name or "")).resolve()
    if not (path / "scenario.json").is_file():
        raise InputError(f"no scenario at {path} (expected {path / 'scenario.json'})")
    load_scenario(path)  # fail now, with its own one-line message, if it is broken
    return str(path)


__all__ = [
    "SourceInfo",
    "SourceRef",
    "SourceRegistry",
    "is_path",
    "load_source",
    "parse_reference",
    "parse_time",
    "resolve_scenario",
    "sources",
    "utc",
]
