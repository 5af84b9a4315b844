"""The model-reply corpus (`tests/data/model_replies/`): load it, and replay one entry through
one path with the fake Messages API server.

An entry is what one role (Composer, Verifier or Executor) answers in a run; every other role
answers as Claude would (`tests.providers.claude_like`, the offline agents behind the fake
server). Two paths, each over real HTTP to the fake server with the Anthropic provider:

- ``verify``: what ``verity verify BUNDLE --provider anthropic`` does (`load_bundle`, the Claude
  Verifier and Composer from `claude_agents`, `verify_bundle`) on the scenario's bundle, exported
  from a run in which every role answered like Claude (an Executor patch is applied to the
  bundle's stored Executor output);
- ``run``: what ``verity run QUERY --scenario NAME`` does with ``VERITY_PROVIDER=anthropic``:
  a Runtime with the Claude agents (`build_runtime`), stepped node by node as the workers step
  it (coordinate, tool calls, nodes), the answer read back from the store.

`Replayer.replay` returns the published answer (`final_answer`), the outcome, the Composer
audit and which of the entry's `invented` strings the published answer contains. The
subprocess forms of both paths (`verity_verify`, `verity_run`) run the real CLI against the same
fake server, for spot checks. `bench/answers.py` and `tests/providers/test_model_replies.py`
share all of it.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from fake_anthropic import FakeAnthropic
from models.composer import ComposerInput, ComposerReply
from pipeline.agents.claude_executor import SUBMIT_EVIDENCE
from pipeline.agents.offline_verifier import OfflineVerifier
from pipeline.agents.template_composer import TemplateComposer
from pipeline.config import VeritySettings
from pipeline.errors import VerityError
from pipeline.factory import build_runtime, claude_agents, resolve_scenario
from pipeline.model import ModelReply
from pipeline.prompts import Prompt
from pipeline.run.runtime import Runtime
from pipeline.scenarios import load_scenario
from pipeline.verification import load_bundle, verify_bundle
from tests.providers import claude_like
from tests.providers.test_fake_runs import drive as drive_scenario

JSON = dict[str, Any]
Path_ = Literal["verify", "run"]
PATHS: tuple[Path_, ...] = ("verify", "run")
ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "data" / "model_replies"
KINDS = ("adversarial", "faithful")
ROLES = ("composer", "verifier", "executor")
KEY = "test-key"
TENANT = "model-replies"
ANSWER_TOOL = {"composer": "submit_answer", "verifier": "submit_verification",
               "executor": SUBMIT_EVIDENCE}


# -- the corpus -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """One corpus entry: what `role` answers (`reply`, whole) or how it changes what Claude
    would answer (`patch`), for scenario `target`; `setup` patches other roles' answers the same
    way (a Verifier that says LOW_CONFID, an Executor claim for the Verifier to inflate)."""

    id: str
    kind: str
    category: str
    role: str
    target: str
    reply: JSON | None
    patch: JSON | None
    setup: dict[str, JSON]
    invented: tuple[str, ...]
    note: str
    file: str
    written_against: str | None = None
    """`cited_digest` of the Composer input the reply was written against: a reply replayed
    against other material (the pipeline changed what it hands the Composer) is stale."""

    def patches(self) -> dict[str, JSON]:
        """Every role's patch: the setup's, and the entry's own when it is a patch."""
        found = dict(self.setup)
        if self.patch is not None:
            found[self.role] = self.patch
        return found

    @property
    def executor_patch(self) -> JSON | None:
        return self.patches().get("executor")


def load_corpus(kind: str | None = None, *, root: Path = CORPUS) -> list[Entry]:
    """Every entry of the corpus (or of one kind), in file then list order; a malformed entry
    is a ValueError naming its file and id."""
    entries: list[Entry] = []
    for which in (kind,) if kind else KINDS:
        for path in sorted((root / which).glob("*.json")):
            for raw in json.loads(path.read_text(encoding="utf-8")):
                entries.append(_entry(raw, which, path.name))
    ids = [e.id for e in entries]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise ValueError(f"duplicate entry ids: {duplicates}")
    return entries


def _entry(raw: JSON, kind: str, file: str) -> Entry:
    where = f"{kind}/{file} {raw.get('id')!r}"
    if raw.get("role") not in ROLES:
        raise ValueError(f"{where}: role must be one of {ROLES}")
    if ("reply" in raw) == ("patch" in raw):
        raise ValueError(f"{where}: give exactly one of reply and patch")
    if raw["role"] == "composer" and "reply" not in raw:
        raise ValueError(f"{where}: a Composer entry is a whole reply")
    if raw["role"] != "composer" and "patch" not in raw:
        raise ValueError(f"{where}: a Verifier or Executor entry is a patch")
    if "reply" in raw:
        ComposerReply.model_validate(raw["reply"])
    invented = tuple(raw.get("invented", ()))
    if kind == "adversarial" and not invented:
        raise ValueError(f"{where}: an adversarial entry names its invented strings")
    if kind == "faithful" and (invented or raw["role"] != "composer"):
        raise ValueError(f"{where}: a faithful entry is a Composer reply with nothing invented")
    unknown = set(raw) - {"id", "category", "role", "target", "reply", "patch", "setup",
                          "invented", "note", "written_against"}
    if unknown:
        raise ValueError(f"{where}: unknown fields {sorted(unknown)}")
    return Entry(id=raw["id"], kind=kind, category=raw["category"], role=raw["role"],
                 target=raw["target"], reply=raw.get("reply"), patch=raw.get("patch"),
                 setup=dict(raw.get("setup", {})), invented=invented,
                 note=raw.get("note", ""), file=file,
                 written_against=raw.get("written_against"))


# -- patches ----------------------------------------------------------------------------------


def patch_executor(document: JSON, patch: Mapping[str, Any]) -> JSON:
    """The Executor's evidence document with `patch` applied.

    - ``set_claims``: ``{claim_id: {field: value}}`` changes fields of an existing claim;
    - ``drop_claims``: claim ids removed;
    - ``add_claims``: new claims; each ``bind`` item ``{"like": claim_id, "binding": n,
      "matched_text": ..., "path": ...}`` copies binding ``n`` (default 0) of that claim of the
      same document (so the invocation id is the run's own) and overrides what it names;
    - ``add_hypotheses``, ``add_missing_info``, ``add_actions``: appended;
    - ``missing_info``, ``hypotheses``, ``recommended_actions``: replaced.
    """
    doc = copy.deepcopy(document)
    claims: list[JSON] = doc["claims"]
    by_id = {c["claim_id"]: c for c in claims}
    for claim_id, fields in patch.get("set_claims", {}).items():
        if claim_id not in by_id:
            raise ValueError(f"no claim {claim_id!r} to change in {sorted(by_id)}")
        by_id[claim_id].update(fields)
    dropped = set(patch.get("drop_claims", ()))
    doc["claims"] = [c for c in claims if c["claim_id"] not in dropped]
    for spec in patch.get("add_claims", ()):
        claim = {k: v for k, v in spec.items() if k != "bind"}
        claim.setdefault("kind", "FINDING")
        claim.setdefault("critical", False)
        claim.setdefault("status", "CONFIRMED")
        claim["evidence_bindings"] = [_binding(by_id, b) for b in spec.get("bind", ())]
        doc["claims"].append(claim)
    for key in ("missing_info", "hypotheses", "recommended_actions"):
        if key in patch:
            doc[key] = copy.deepcopy(patch[key])
    doc.setdefault("hypotheses", []).extend(copy.deepcopy(patch.get("add_hypotheses", [])))
    doc.setdefault("missing_info", []).extend(patch.get("add_missing_info", []))
    doc.setdefault("recommended_actions", []).extend(copy.deepcopy(patch.get("add_actions", [])))
    return doc


def _binding(by_id: Mapping[str, JSON], spec: Mapping[str, Any]) -> JSON:
    if spec["like"] not in by_id:
        raise ValueError(f"no claim {spec['like']!r} to bind like in {sorted(by_id)}")
    source = by_id[spec["like"]]["evidence_bindings"][spec.get("binding", 0)]
    return {**source, **{k: spec[k] for k in ("path", "matched_text", "tool_name") if k in spec}}


def patch_verifier(output: JSON, patch: Mapping[str, Any]) -> JSON:
    """The Verifier's output with `patch` applied: ``verdict``, ``groundedness_score``,
    ``rationale`` replaced; ``set_verification`` ``{claim_id or "*": class}`` (a claim the
    output has no check for gets one); ``set_notes``; ``add_gaps`` appended; ``evidence_gaps``
    replaced."""
    out = copy.deepcopy(output)
    for key in ("verdict", "groundedness_score", "rationale", "evidence_gaps"):
        if key in patch:
            out[key] = copy.deepcopy(patch[key])
    checks: list[JSON] = out["claim_checks"]
    wanted: Mapping[str, str] = patch.get("set_verification", {})
    if "*" in wanted:
        for check in checks:
            check["verification"] = wanted["*"]
    known = {c["claim_id"]: c for c in checks}
    for claim_id, verification in wanted.items():
        if claim_id == "*":
            continue
        if claim_id in known:
            known[claim_id]["verification"] = verification
        else:
            checks.append({"claim_id": claim_id, "verification": verification,
                           "evidence_refs": [], "note": None})
    for claim_id, note in patch.get("set_notes", {}).items():
        if claim_id in known:
            known[claim_id]["note"] = note
    out.setdefault("evidence_gaps", []).extend(copy.deepcopy(patch.get("add_gaps", [])))
    out.pop("facts_checked", None)
    return out


def patched_bundle(bundle_text: str, executor_patch: Mapping[str, Any] | None) -> str:
    """The bundle with the patch applied to its stored Executor output (as JSON text)."""
    if not executor_patch:
        return bundle_text
    bundle = json.loads(bundle_text)
    document = json.loads(bundle["executor_output_raw"])
    bundle["executor_output_raw"] = json.dumps(patch_executor(document, executor_patch))
    return json.dumps(bundle, indent=2)


# -- responders -------------------------------------------------------------------------------


@dataclass
class ComposerCalls:
    """What the Composer was sent and what it answered, call by call, and what any responder
    raised (a patch naming a claim the run does not have is the corpus's bug, not Verity's)."""

    calls: list[tuple[str, JSON]] = field(default_factory=list)
    """(the framed composer input, the reply) of each call."""
    errors: list[str] = field(default_factory=list)


def _composer_input_of(request: JSON) -> str:
    text = "\n".join(b.get("text", "") for b in request["messages"][0]["content"]
                     if b.get("type") == "text")
    return claude_like.framed(text, "composer_input") or ""


def responders(entry: Entry | None, log: ComposerCalls) -> dict[str, Callable[[JSON], JSON]]:
    """Every role answering like Claude, the entry's role with its reply or patch, the setup's
    roles with their patches; the Composer's calls are logged.

    A Verifier patch applies to every Verifier call; an Executor patch to the evidence the
    Executor submits in the run's first cycle only (an evidence-gap cycle's output has claims
    of its own, renamed `g1-…` in the union, which is what a bundle holds and what the patch
    then meets on the verify path)."""
    patches = entry.patches() if entry is not None else {}

    def verifier(request: JSON) -> JSON:
        answer = claude_like.verifier(request)
        if "verifier" in patches:
            answer["tool_use"]["input"] = patch_verifier(answer["tool_use"]["input"],
                                                         patches["verifier"])
        return answer

    def executor(request: JSON) -> JSON:
        answer = claude_like.executor(request)
        use = answer["tool_use"]
        if ("executor" in patches and isinstance(use, dict) and use["name"] == SUBMIT_EVIDENCE
                and not claude_like.transcript_of(request).gaps):
            use["input"] = patch_executor(use["input"], patches["executor"])
        return answer

    def composer(request: JSON) -> JSON:
        answer: JSON
        if entry is not None and entry.role == "composer" and entry.reply is not None:
            answer = {"tool_use": {"name": ANSWER_TOOL["composer"],
                                   "input": copy.deepcopy(entry.reply)}}
        else:
            answer = claude_like.composer(request)
        log.calls.append((_composer_input_of(request), answer["tool_use"]["input"]))
        return answer

    chosen = {**claude_like.RESPONDERS, "verifier": verifier, "executor": executor,
              "composer": composer}
    return {role: _logged(responder, role, log) for role, responder in chosen.items()}


def _logged(responder: Callable[[JSON], JSON], role: str, log: ComposerCalls
            ) -> Callable[[JSON], JSON]:
    def answer(request: JSON) -> JSON:
        try:
            return responder(request)
        except Exception as exc:
            log.errors.append(f"{role}: {exc!r}")
            raise

    return answer


# -- outcomes ---------------------------------------------------------------------------------


@dataclass
class Replay:
    """One entry through one path: the outcome, the published answer, what leaked."""

    entry_id: str
    path: str
    status: str
    verdict: str | None
    fallback_type: str | None
    final_answer: JSON | None
    composer_audit: JSON | None
    leaked: list[str]
    seconds: float
    composer_calls: list[tuple[str, JSON]]
    offline: tuple[str, str | None, str | None] | None = None
    """(status, verdict, fallback_type) of the offline Verifier and Composer on the same
    evidence (the path's bundle, the entry's Executor patch applied)."""
    stale: bool | None = None
    """For a Composer reply written against a recorded input: whether what it cites now
    differs from what it was written against (None when nothing was recorded or composed)."""

    @property
    def outcome(self) -> tuple[str, str | None, str | None]:
        return (self.status, self.verdict, self.fallback_type)

    @property
    def same_as_offline(self) -> bool | None:
        return None if self.offline is None else self.outcome == self.offline

    @property
    def published(self) -> str:
        return published_text(self.final_answer)

    @property
    def accepted(self) -> bool:
        """The Composer's reply was published as it was: accepted, and no fallback."""
        return (self.fallback_type is None and self.composer_audit is not None
                and self.composer_audit.get("status") == "accepted")

    @property
    def refusals(self) -> list[JSON]:
        return list((self.composer_audit or {}).get("rejected", []))

    def around(self, invented: str, width: int = 90) -> str:
        """The published text around the first occurrence of `invented`."""
        text = self.published
        at = text.casefold().find(invented.casefold())
        if at < 0:
            return ""
        start, end = max(0, at - width), min(len(text), at + len(invented) + width)
        return text[start:end].replace("\n", " | ")

    def summary(self) -> JSON:
        return {"entry": self.entry_id, "path": self.path, "status": self.status,
                "verdict": self.verdict, "fallback_type": self.fallback_type,
                "audit": (self.composer_audit or {}).get("status"), "leaked": self.leaked,
                "same_as_offline": self.same_as_offline, "stale": self.stale,
                "seconds": round(self.seconds, 3)}


def cited_digest(reply: Mapping[str, Any], composer_input: ComposerInput) -> str:
    """A short digest of the verdict and of the text of every id `reply` cites, as
    `composer_input` states them (an absent id as null)."""
    texts: dict[str, str] = {c.claim_id: c.text for c in composer_input.allowed_claims}
    texts.update({h.hypothesis_id: h.text for h in composer_input.allowed_hypotheses})
    texts.update({g.gap_id: g.text for g in composer_input.missing_info})
    texts.update({a.action_id: a.text for a in composer_input.recommended_actions})
    cited = sorted({i for statements in reply.values() for s in statements for i in s["cites"]})
    payload = json.dumps([composer_input.verdict.value, [[i, texts.get(i)] for i in cited]])
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]


def published_text(final_answer: Mapping[str, Any] | None) -> str:
    """What the user reads: the summary, the answer and the actions, one per line."""
    if not final_answer:
        return ""
    return "\n".join([final_answer.get("answer_summary", ""),
                      final_answer.get("user_facing_answer", ""),
                      *final_answer.get("recommended_actions", [])])


def leaks(invented: tuple[str, ...] | list[str], text: str) -> list[str]:
    """The invented strings `text` contains, case-insensitively (whitespace runs as one)."""
    folded = " ".join(text.casefold().split())
    return [s for s in invented if " ".join(s.casefold().split()) in folded]


def _audit_of(self_evaluation: Mapping[str, Any] | None) -> JSON | None:
    evaluation = (self_evaluation or {}).get("verifier_evaluation") or {}
    audit: JSON | None = evaluation.get("composer_audit")
    return audit


# -- the replayer -----------------------------------------------------------------------------


@dataclass
class _PatchedVerifier:
    """A Verifier whose every answer gets `patch` (`patch_verifier`)."""

    verifier: OfflineVerifier
    patch: Mapping[str, Any]
    model: str = "offline-verifier"

    def respond(self, prompt: Prompt, payload: bytes) -> ModelReply:
        reply = self.verifier.respond(prompt, payload)
        return ModelReply(text=json.dumps(patch_verifier(json.loads(reply.text), self.patch)))


class Replayer:
    """One fake Messages API server, one store, and per scenario its like-Claude bundle:
    replays entries one at a time (the fake's responders are set per entry)."""

    def __init__(self, workdir: Path | None = None) -> None:
        self._tmp = None if workdir else tempfile.TemporaryDirectory(prefix="verity-replies-")
        self.workdir = workdir or Path(self._tmp.name)  # type: ignore[union-attr]
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.fake = FakeAnthropic(required_key=KEY).start()
        self.settings = VeritySettings(
            database_url=f"sqlite:///{self.workdir / 'replays.db'}", provider="anthropic",
            anthropic_api_key=KEY, anthropic_base_url=self.fake.base_url)
        self._runtime: Runtime | None = None
        self._bundles: dict[str, str] = {}
        self._offline: dict[tuple[str, str], tuple[str, str | None, str | None]] = {}

    def close(self) -> None:
        if self._runtime is not None:
            self._runtime.store.close()
        self.fake.stop()
        if self._tmp is not None:
            self._tmp.cleanup()

    def __enter__(self) -> Replayer:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    @property
    def runtime(self) -> Runtime:
        if self._runtime is None:
            self._runtime = build_runtime(self.settings)
        return self._runtime

    @contextmanager
    def answering(self, entry: Entry | None) -> Iterator[ComposerCalls]:
        """The fake answers for `entry` (like Claude everywhere when None) inside the block."""
        log = ComposerCalls()
        self.fake.reset()
        for role, responder in responders(entry, log).items():
            self.fake.set_default_responder(responder, role)
        try:
            yield log
        finally:
            self.fake.reset()

    # -- the scenario's bundle -----------------------------------------------------------------

    def bundle(self, scenario: str) -> str:
        """The scenario's bundle: a run in which every role answered like Claude, exported
        (`verity export`'s `to_bundle`), once per scenario."""
        if scenario not in self._bundles:
            with self.answering(None):
                run_id = drive(self.runtime, scenario)
            bundle = self.runtime.store.to_bundle(run_id, tenant_id=TENANT)
            self._bundles[scenario] = bundle.model_dump_json(indent=2)
        return self._bundles[scenario]

    def offline_outcome(self, bundle_text: str, verifier_patch: Mapping[str, Any] | None = None
                        ) -> tuple[str, str | None, str | None]:
        """The offline Verifier and Composer on a bundle (`verity verify` without a key). With
        `verifier_patch` the offline Verifier's answer is patched as the entry patches the
        like-Claude one: the same judgement, so what is compared is what the pipeline makes of
        it, not two judges."""
        key = (bundle_text, json.dumps(verifier_patch, sort_keys=True))
        if key not in self._offline:
            verifier = (OfflineVerifier() if verifier_patch is None
                        else _PatchedVerifier(OfflineVerifier(), verifier_patch))
            result = verify_bundle(load_bundle(bundle_text), verifier=verifier,
                                   composer=TemplateComposer()).result
            self._offline[key] = (
                result.status, result.verdict.value if result.verdict else None,
                result.fallback_type.value if result.fallback_type else None)
        return self._offline[key]

    # -- one entry -----------------------------------------------------------------------------

    def replay(self, entry: Entry, path: str) -> Replay:
        """`entry` through `path` ("verify" or "run")."""
        if path == "verify":
            return self.replay_verify(entry)
        if path == "run":
            return self.replay_run(entry)
        raise ValueError(f"unknown path {path!r}")

    def replay_verify(self, entry: Entry) -> Replay:
        """`verity verify BUNDLE --provider anthropic` in this process."""
        text = patched_bundle(self.bundle(entry.target), entry.executor_patch)
        with self.answering(entry) as log:
            started = time.perf_counter()
            agents = claude_agents(self.settings)
            run = verify_bundle(load_bundle(text, settings=self.settings),
                                verifier=agents.verifier, composer=agents.composer,
                                settings=self.settings)
            seconds = time.perf_counter() - started
        result = run.result.model_dump(mode="json")
        replay = self._replay(entry, "verify", result, seconds, log)
        if entry.role != "composer":
            replay.offline = self.offline_outcome(text, entry.patches().get("verifier"))
        return replay

    def replay_run(self, entry: Entry) -> Replay:
        """`verity run QUERY --scenario NAME` with VERITY_PROVIDER=anthropic, in this process:
        the Claude runtime stepped as its workers step it."""
        with self.answering(entry) as log:
            started = time.perf_counter()
            run_id = drive(self.runtime, entry.target)
            seconds = time.perf_counter() - started
        record = self.runtime.store.get_run(run_id, tenant_id=TENANT)
        result = {
            "status": record.status.value,
            "verdict": record.verdict.value if record.verdict else None,
            "fallback_type": record.fallback_type.value if record.fallback_type else None,
            "final_answer": (record.final_answer.model_dump(mode="json")
                             if record.final_answer else None),
            "self_evaluation": (record.self_evaluation.model_dump(mode="json")
                                if record.self_evaluation else None),
        }
        replay = self._replay(entry, "run", result, seconds, log)
        if entry.role == "composer":
            return replay
        if entry.executor_patch:
            try:
                own = self.runtime.store.to_bundle(run_id, tenant_id=TENANT).model_dump_json()
            except VerityError:  # no Executor output was stored: nothing to judge offline
                return replay
            replay.offline = self.offline_outcome(own, entry.patches().get("verifier"))
        else:
            replay.offline = self.offline_outcome(self.bundle(entry.target),
                                                  entry.patches().get("verifier"))
        return replay

    @staticmethod
    def _replay(entry: Entry, path: str, result: Mapping[str, Any], seconds: float,
                log: ComposerCalls) -> Replay:
        if log.errors:
            raise ValueError(f"entry {entry.id} on the {path} path: a responder raised: "
                             f"{log.errors[0]}")
        final = result.get("final_answer")
        stale = None
        if entry.written_against and entry.reply is not None and log.calls:
            stale = cited_digest(entry.reply, composer_input_of(log.calls[0])) != (
                entry.written_against)
        return Replay(
            entry_id=entry.id, path=path, status=result["status"], verdict=result["verdict"],
            fallback_type=result["fallback_type"], final_answer=final,
            composer_audit=_audit_of(result.get("self_evaluation")),
            leaked=leaks(entry.invented, published_text(final)), seconds=seconds,
            composer_calls=list(log.calls), stale=stale)

    # -- the real CLI, for spot checks ---------------------------------------------------------

    def cli_env(self, home: Path, **extra: str) -> dict[str, str]:
        clean = {k: v for k, v in os.environ.items()
                 if not k.startswith(("VERITY_", "ANTHROPIC_"))}
        return {**clean, "VERITY_HOME": str(home), "ANTHROPIC_API_KEY": KEY,
                "ANTHROPIC_BASE_URL": self.fake.base_url, **extra}

    def verity_verify(self, entry: Entry) -> JSON:
        """`verity verify BUNDLE --json --provider anthropic` as a subprocess."""
        home = Path(tempfile.mkdtemp(dir=self.workdir, prefix="cli-"))
        bundle = home / "bundle.json"
        bundle.write_text(patched_bundle(self.bundle(entry.target), entry.executor_patch),
                          encoding="utf-8")
        with self.answering(entry):
            return _cli(["verify", str(bundle), "--json", "--provider", "anthropic"],
                        env=self.cli_env(home))

    def verity_run(self, entry: Entry) -> JSON:
        """`verity run QUERY --scenario NAME --json` with VERITY_PROVIDER=anthropic as a
        subprocess (its embedded worker, its own SQLite file)."""
        home = Path(tempfile.mkdtemp(dir=self.workdir, prefix="cli-"))
        question = load_scenario(Path(resolve_scenario(entry.target, None))).meta.question
        with self.answering(entry):
            return _cli(["run", question, "--scenario", entry.target, "--json"],
                        env=self.cli_env(home, VERITY_PROVIDER="anthropic"))


def _cli(args: list[str], *, env: dict[str, str]) -> JSON:
    done = subprocess.run([sys.executable, "-m", "cli.main", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"verity {args[0]} exited {done.returncode}: {done.stderr[-2000:]}")
    result: JSON = json.loads(done.stdout)
    return result


def cli_replay(entry: Entry, path: str, result: Mapping[str, Any]) -> Replay:
    """A CLI result read as a Replay (no timing, no Composer log)."""
    return Replayer._replay(entry, path, result, 0.0, ComposerCalls())


def drive(runtime: Runtime, scenario: str) -> str:
    """Run one scenario to its end in this thread, node by node, as this corpus's tenant."""
    return drive_scenario(runtime, scenario, tenant_id=TENANT)


def composer_input_of(call: tuple[str, JSON]) -> ComposerInput:
    """The ComposerInput of one logged Composer call."""
    return ComposerInput.model_validate_json(call[0])
