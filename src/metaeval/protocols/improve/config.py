"""IMPROVE config layering: SUT config and experiment manifest, resolved into one run contract.

Four layers (AIE Bench, Appendix C.3):

1. suite config   - which benchmark slice is evaluated (loaded here as a JSON object; the typed
                    schema lives in `suites.py`);
2. system profile - how one PACT server is launched (`profiles.SystemProfile`); the target-agent
                    profile (the "SUM profile") also declares the mutable root;
3. SUT config     - the meta-agent lane: contract, agent, tool menu, timeout, launch profile and
                    SUM profile (`SutConfig`);
4. manifest       - one concrete recursive run: baseline, suites, budgets, mutation policy,
                    output (`ExperimentManifest`, Appendix B.1).

`resolve_manifest(path)` loads the manifest and every file it reaches, resolves every relative
reference against the directory of the file that contains it (never the current directory),
validates each file, hashes each file's bytes and pins the baseline commit to a full SHA. The
result's `to_json()` is the fully explicit run contract written to a bundle as
`resolved_manifest.json`; `source_text` is written verbatim as `source_manifest.json`.

Path fields that are *not* config-file references are kept as written: a profile's `cwd`,
`mutable_root` and `allowed_mutation_paths` are relative to the scaffold (the candidate or
optimizer worktree) and only mean something at launch time.

`baseline.base_commit` is 7-40 hex digits or the literal `HEAD`; either way it is looked up in
the baseline repository at resolution time and recorded as the full 40-hex SHA (the spelling
as written is kept as `base_commit_spec`). `HEAD` is convenient for a freshly materialized
target repo (`metaeval improve init-target`); the resolved manifest still pins one commit.

Every model forbids unknown keys and validates JSON types strictly (`"5"` is not a number), so
a typo is an error naming the file and the field instead of a silently ignored setting.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from metaeval.errors import ConfigError
from metaeval.protocols.improve.profiles import SystemProfile
from metaeval.records.names import SafeName
from metaeval.sandbox.git import git_result
from metaeval.sandbox.process import ExecResult

# Sane maxima: a typo in a count or a time limit is an error, not a run that never ends (and
# no value reaches a timer or a lock as inf or 1e308, which raise OverflowError there).
MAX_TRIALS = 10_000
MAX_STEPS = 100_000
MAX_SECONDS = 7 * 24 * 3600.0
DEFAULT_META_MAX_STEPS = 40
"""Steps a meta-agent gets per trial when the SUT config sets no `max_steps`."""

RESOLVED_SCHEMA = "metaeval.improve.resolved_manifest/1"
SOURCE_MANIFEST_NAME = "source_manifest.json"
RESOLVED_MANIFEST_NAME = "resolved_manifest.json"

MetaAgentName = Literal["scripted", "toolloop", "claude-code", "codex", "gemini-cli", "pact"]
Contract = Literal["patch/1", "edit/1"]
SelectionGate = Literal["record_only", "must_not_regress", "must_improve"]

_HEX_COMMIT = re.compile(r"^[0-9a-fA-F]{7,40}$")


class _FieldError(ValueError):
    """A cross-field check that knows which sub-field is at fault (for the error location)."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# --- SUT config (layer 3) ---------------------------------------------------------------------


class MetaAgentSpec(_Strict):
    """Which agent plays the meta-agent, on which model, with which agent options."""

    agent: MetaAgentName
    model: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)


class SutConfig(_Strict):
    """The benchmarked meta-agent lane.

    `contract` fixes what one proposal is: `patch/1` - the meta-agent returns a unified diff and
    names the parent it was derived from; `edit/1` - the meta-agent edits the optimizer
    worktree and the framework takes the diff against the parent. `launch_profile` is the
    meta-agent's SystemProfile: the PACT server of the `pact` lane, which the harness launches
    and drives each trial (`metaeval.protocols.improve.pact.meta_agent`); the other lanes are
    started by metaeval itself and refuse a launch profile;
    `sum_profile` is the target-agent SystemProfile, which declares `mutable_root` and
    `allowed_mutation_paths`.
    Both paths are relative to this file.

    Per trial the meta-agent runs for at most `timeout_s` seconds of wall clock (and never
    longer than the manifest's `budget_step_timeout_s`) and `max_steps` agent steps
    (default 40). `tool_menu` is an allow-list of the tools it is offered (empty: the lane's
    full menu); only the toolloop lane can honour one, any other lane refuses a non-empty
    menu.
    """

    name: str = Field(min_length=1)
    description: str | None = None
    contract: Contract
    meta_agent: MetaAgentSpec
    tool_menu: list[str] = Field(default_factory=list)
    timeout_s: float = Field(default=600.0, gt=0, le=MAX_SECONDS)
    max_steps: int = Field(default=DEFAULT_META_MAX_STEPS, ge=1, le=MAX_STEPS)
    launch_profile: Path | None = None
    sum_profile: Path

    @field_validator("tool_menu")
    @classmethod
    def _tools_unique(cls, value: list[str]) -> list[str]:
        dupes = sorted({t for t in value if value.count(t) > 1})
        if dupes:
            raise ValueError(f"duplicate tool(s): {', '.join(dupes)}")
        return value


# --- experiment manifest (layer 4) ------------------------------------------------------------


class SutRef(_Strict):
    sut_config: Path


class Baseline(_Strict):
    """The pinned starting target-agent: a git repository and a commit in it."""

    id: SafeName = "baseline"  # the lineage node id of the baseline
    repo: Path
    base_commit: str

    @field_validator("base_commit")
    @classmethod
    def _hex_or_head(cls, value: str) -> str:
        if value == "HEAD":
            return value
        if not _HEX_COMMIT.match(value):
            raise ValueError(f"expected 7-40 hex digits or HEAD, got {value!r}")
        return value.lower()


class SuiteRef(_Strict):
    """The optimize view: a suite config and (optionally) the split to take from it.

    `split_id` overrides the suite config's own `split_id`; when omitted, the suite config's
    value is used. The effective split is recorded in the resolved manifest.
    """

    suite_config: Path
    split_id: str | None = None


class HeldOut(_Strict):
    """The held-out view: never shown to the meta-agent, used by the selection gate.

    `required: true` enables held-out evaluation and needs `suite_config`. `selection_gate`:
    `record_only` (held-out scores are recorded, promotion depends on optimize only),
    `must_not_regress` or `must_improve` (promotion additionally needs the held-out aggregate
    to hold or to rise). The two gating values need `required: true`.
    """

    required: bool = False
    suite_config: Path | None = None
    split_id: str | None = None
    selection_gate: SelectionGate = "record_only"

    @model_validator(mode="after")
    def _consistent(self) -> HeldOut:
        if self.required and self.suite_config is None:
            raise _FieldError("suite_config", "required is true but no suite_config is given")
        if not self.required:
            if self.selection_gate != "record_only":
                raise _FieldError(
                    "selection_gate",
                    f"'{self.selection_gate}' gates on held-out scores; set required: true "
                    "and give a suite_config, or use 'record_only'",
                )
            for name in ("suite_config", "split_id"):
                if getattr(self, name) is not None:
                    raise _FieldError(
                        name,
                        "held-out evaluation is off (required: false); set required: true to "
                        "evaluate it, or remove this field",
                    )
        return self


class Evaluation(_Strict):
    optimize: SuiteRef
    held_out: HeldOut = Field(default_factory=HeldOut)


class TargetBudget(_Strict):
    """The target-agent evaluation budget: steps and wall time per task, for every version.

    Distinct from the optimizer trial budget (Section 3.4); fixed for the whole experiment.
    """

    max_steps_per_task: int = Field(ge=1, le=MAX_STEPS)
    task_timeout_s: float = Field(gt=0, le=MAX_SECONDS)


class TargetModelSettings(_Strict):
    """The target agent's model (manifest `sum`), fixed for every version of the target.

    `model` is a metaeval model name (`local/smollm2`, `openai/gpt-4o`, `anthropic/...`,
    `litellm/...`) or `none`. Targets whose profile says `model_api: openai` reach it over an
    OpenAI-compatible endpoint: `base_url` names an existing server (vLLM, llama.cpp, Ollama;
    its key read from the environment variable `api_key_env`); without one, a `local/` model is
    served by the harness with llama-cpp-python's server on 127.0.0.1 (`n_ctx` tokens of
    context) for the whole run. `max_tokens` caps each reply and `temperature` sets sampling
    (null: the provider's default; 0 for reproducible local runs).
    """

    model: str = "local/smollm2"
    base_url: str | None = None
    api_key_env: str | None = None
    n_ctx: int = Field(default=8192, ge=512, le=1_048_576)
    max_tokens: int | None = Field(default=None, ge=1, le=1_048_576)
    temperature: float | None = Field(default=None, ge=0, le=2)

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("base_url must start with http:// or https://")
        return value


class MutationPolicy(_Strict):
    """Where the mutation boundary comes from.

    `sum_profile`: the SUM profile's `mutable_root`/`allowed_mutation_paths`; `boundary`, if
    given, is a narrowing override. `file`: the boundary file is the declared boundary.
    `boundary` is relative to the manifest.
    """

    source: Literal["sum_profile", "file"] = "sum_profile"
    boundary: Path | None = None

    @model_validator(mode="after")
    def _file_needs_boundary(self) -> MutationPolicy:
        if self.source == "file" and self.boundary is None:
            raise _FieldError("boundary", "source is 'file' but no boundary file is given")
        return self


class ExperimentManifest(_Strict):
    """One recursive run (Appendix B.1). Relative paths are relative to the manifest file."""

    mode: Literal["recursive_search"]
    description: str | None = None
    sut: SutRef
    sum: TargetModelSettings = Field(default_factory=TargetModelSettings)
    baseline: Baseline
    evaluation: Evaluation
    trial_budget: int = Field(ge=1, le=MAX_TRIALS)  # candidate proposals over the whole run
    budget_step_timeout_s: float = Field(
        default=1200.0, gt=0, le=MAX_SECONDS
    )  # wall time for one trial
    target_budget: TargetBudget
    mutation_policy: MutationPolicy = Field(default_factory=MutationPolicy)
    output: Path
    seed: int = 0


# --- loading ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class FileRecord:
    """One file that went into the run contract: absolute path and sha256 of its bytes."""

    path: Path
    sha256: str

    def to_json(self) -> dict[str, str]:
        return {"path": str(self.path), "sha256": self.sha256}


@dataclass(frozen=True)
class _Loaded:
    path: Path
    raw: bytes
    text: str
    data: dict[str, Any]

    @property
    def record(self) -> FileRecord:
        return FileRecord(self.path, hashlib.sha256(self.raw).hexdigest())


def _show(path: Path) -> str:
    """A path for messages: relative to the current directory when below it."""
    try:
        return str(path.relative_to(Path.cwd()))
    except (ValueError, OSError):  # not below the cwd, or the cwd is gone
        return str(path)


def _resolve_ref(ref: Path, base_file: Path) -> Path:
    """`ref` made absolute against the directory of the file that contains it."""
    return (base_file.parent / ref).resolve()  # an absolute `ref` replaces the base


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


def _read_json_object(
    path: Path,
    *,
    referenced_by: Path | None = None,
    ref_field: str | None = None,
    ref: Path | None = None,
) -> _Loaded:
    """Read a JSON object; a missing file is reported against the file that names it."""
    if not path.is_file():
        problem = "not a file" if path.exists() else "file not found"
        if referenced_by is None:
            raise ConfigError(f"{problem}: {path}")
        shown = f"{ref} (resolved to {path})" if ref is not None and str(ref) != str(path) else path
        raise ConfigError(f"{problem}: {shown}", file=_show(referenced_by), field=ref_field)
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"not UTF-8 text: {exc}", file=_show(path)) from exc
    try:
        data = json.loads(
            text, object_pairs_hook=_no_duplicate_keys, parse_constant=_reject_constant
        )
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}", file=_show(path)
        ) from exc
    except ValueError as exc:  # raised by the hooks; no position available
        raise ConfigError(f"invalid JSON: {exc}", file=_show(path)) from exc
    except RecursionError as exc:
        raise ConfigError("invalid JSON: nested too deeply", file=_show(path)) from exc
    if not isinstance(data, dict):
        raise ConfigError(
            f"expected a JSON object at the top level, got {type(data).__name__}",
            file=_show(path),
        )
    return _Loaded(path, raw, text, data)


def _validate(model: type[BaseModel], loaded: _Loaded) -> Any:
    """Validate strictly against `model`; the first problem names this file and its field."""
    try:
        return model.model_validate_json(loaded.text, strict=True)
    except ValidationError as exc:
        # an unknown key first: a typo also makes the intended key "missing"
        errors = sorted(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")
        first = errors[0]
        loc = [str(p) for p in first["loc"]]
        message = first["msg"]
        error = (first.get("ctx") or {}).get("error")
        if isinstance(error, _FieldError):
            loc.append(error.field)
            message = str(error)
        elif first["type"] == "extra_forbidden":
            message = "unknown field (not part of the schema; a typo?)"
        elif first["type"] == "missing":
            message = "required field is missing"
        if len(errors) > 1:
            message += f" (and {len(errors) - 1} more problem(s))"
        field_name = ".".join(loc) or "(top level)"
        raise ConfigError(message, file=_show(loaded.path), field=field_name) from exc


def load_sut_config(path: Path) -> SutConfig:
    """Parse and validate one SUT config; its profile paths are made absolute (not loaded)."""
    path = Path(path).resolve()
    loaded = _read_json_object(path)
    sut: SutConfig = _validate(SutConfig, loaded)
    return _absolute_sut(sut, path)


def load_system_profile(path: Path) -> SystemProfile:
    """Parse and validate one SystemProfile JSON file."""
    path = Path(path).resolve()
    return _validate(SystemProfile, _read_json_object(path))


def _check_launch_profile(sut: SutConfig, profile: SystemProfile | None, sut_path: Path) -> None:
    """A launch profile is honoured by the `pact` lane only, which needs one; its server runs
    in the optimizer worktree, so a profile naming another working directory is refused."""
    lane = sut.meta_agent.agent
    if lane == "pact" and profile is None:
        raise ConfigError(
            "the pact meta-agent lane is the PACT server a launch_profile describes; none given",
            file=str(sut_path),
            field="launch_profile",
        )
    if lane != "pact" and profile is not None:
        raise ConfigError(
            f"the meta-agent lane '{lane}' is started by metaeval itself and cannot honour a "
            "launch profile; remove launch_profile, or set meta_agent.agent to 'pact' to run "
            "the profile's PACT server as the meta-agent",
            file=str(sut_path),
            field="launch_profile",
        )
    if profile is not None and profile.cwd is not None and str(profile.cwd) != ".":
        raise ConfigError(
            f"cwd {profile.cwd}: the meta-agent's server runs in the optimizer worktree; "
            "leave cwd out or set it to '.'",
            file=str(sut.launch_profile),
            field="cwd",
        )


def _absolute_sut(sut: SutConfig, sut_path: Path) -> SutConfig:
    launch = _resolve_ref(sut.launch_profile, sut_path) if sut.launch_profile else None
    return sut.model_copy(
        update={"launch_profile": launch, "sum_profile": _resolve_ref(sut.sum_profile, sut_path)}
    )


# --- git ----------------------------------------------------------------------------------------


def _git(repo: Path, *args: str) -> ExecResult:
    return git_result(repo, *args, timeout_s=60)


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[0] if lines else ""


def resolve_base_commit(repo: Path, spec: str, *, manifest: Path | None = None) -> str:
    """The full SHA of commit `spec` (hex prefix or HEAD) in the git repository rooted at `repo`."""
    where = _show(manifest) if manifest else None
    if not repo.is_dir():
        raise ConfigError(
            f"baseline repository not found: {repo} (materialize it first, e.g. "
            "`metaeval improve init-target`)",
            file=where,
            field="baseline.repo",
        )
    top = _git(repo, "rev-parse", "--show-toplevel")
    if top.returncode == 127:
        raise ConfigError("git is not installed", file=where, field="baseline.repo")
    if top.returncode != 0:
        detail = _first_line(top.stderr)
        raise ConfigError(
            f"not a git repository: {repo}" + (f" ({detail})" if detail else ""),
            file=where,
            field="baseline.repo",
        )
    toplevel = Path(top.stdout.strip()).resolve()
    if toplevel != repo.resolve():
        raise ConfigError(
            f"{repo} is not the root of a git repository (it lies inside {toplevel})",
            file=where,
            field="baseline.repo",
        )
    found = _git(repo, "rev-parse", "--verify", f"{spec}^{{commit}}")
    sha = found.stdout.strip()
    if found.returncode != 0 or not re.fullmatch(r"[0-9a-f]{40}", sha):
        detail = _first_line(found.stderr)
        raise ConfigError(
            f"commit {spec!r} not found in baseline repository {repo}"
            + (f" ({detail})" if detail else ""),
            file=where,
            field="baseline.base_commit",
        )
    return sha


def _within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


# --- the resolved run contract ------------------------------------------------------------------


@dataclass(frozen=True)
class ResolvedSuite:
    """One evaluation view after resolution: the suite config file, its split, its content."""

    role: str  # "optimize" | "held_out"
    suite_config: Path
    split_id: str | None  # effective: the manifest's split_id, else the suite config's
    content: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {
            "suite_config": str(self.suite_config),
            "split_id": self.split_id,
            "suite": self.content,
        }


@dataclass(frozen=True)
class ResolvedManifest:
    """The fully explicit contract of one recursive run.

    `manifest` is the ExperimentManifest with every path absolute, the effective split ids and
    the full base commit; `sut` is the SutConfig with absolute profile paths; `files` maps a
    role (manifest, sut_config, launch_profile, sum_profile, optimize_suite, held_out_suite,
    boundary) to the file's absolute path and sha256.
    """

    manifest_path: Path
    source_bytes: bytes
    manifest: ExperimentManifest
    sut: SutConfig
    launch_profile: SystemProfile | None
    sum_profile: SystemProfile
    optimize: ResolvedSuite
    held_out: ResolvedSuite | None
    boundary: dict[str, Any] | None
    base_commit_spec: str
    files: dict[str, FileRecord] = field(default_factory=dict)

    @property
    def source_text(self) -> str:
        """The manifest file's text exactly as given (for `source_manifest.json`)."""
        return self.source_bytes.decode("utf-8")

    @property
    def base_commit(self) -> str:
        return self.manifest.baseline.base_commit

    @property
    def output(self) -> Path:
        return self.manifest.output

    def to_json(self) -> dict[str, Any]:
        """The resolved manifest as a JSON-ready dict (deterministic for the same inputs)."""
        m = self.manifest
        policy = m.mutation_policy
        held = m.evaluation.held_out
        return {
            "schema": RESOLVED_SCHEMA,
            "mode": m.mode,
            "description": m.description,
            "manifest": str(self.manifest_path),
            "files": {role: rec.to_json() for role, rec in self.files.items()},
            "sut": {
                "sut_config": str(m.sut.sut_config),
                "config": self.sut.model_dump(mode="json"),
                "launch_profile": (
                    self.launch_profile.model_dump(mode="json") if self.launch_profile else None
                ),
                "sum_profile": self.sum_profile.model_dump(mode="json"),
            },
            "sum": m.sum.model_dump(mode="json"),
            "baseline": {
                "id": m.baseline.id,
                "repo": str(m.baseline.repo),
                "base_commit": m.baseline.base_commit,
                "base_commit_spec": self.base_commit_spec,
            },
            "evaluation": {
                "optimize": self.optimize.to_json(),
                "held_out": {
                    "required": held.required,
                    "selection_gate": held.selection_gate,
                    **(
                        self.held_out.to_json()
                        if self.held_out
                        else {"suite_config": None, "split_id": None, "suite": None}
                    ),
                },
            },
            "trial_budget": m.trial_budget,
            "budget_step_timeout_s": m.budget_step_timeout_s,
            "target_budget": m.target_budget.model_dump(mode="json"),
            "mutation_policy": {
                "source": policy.source,
                "boundary": str(policy.boundary) if policy.boundary else None,
                "boundary_content": self.boundary,
                "mutable_root": self.sum_profile.mutable_root,
                "allowed_mutation_paths": list(self.sum_profile.allowed_mutation_paths),
            },
            "output": str(m.output),
            "seed": m.seed,
        }

    def to_json_text(self) -> str:
        return json.dumps(self.to_json(), indent=2, ensure_ascii=False) + "\n"

    def write(self, directory: Path) -> tuple[Path, Path]:
        """Write `source_manifest.json` (verbatim) and `resolved_manifest.json` into `directory`."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        source = directory / SOURCE_MANIFEST_NAME
        resolved = directory / RESOLVED_MANIFEST_NAME
        source.write_bytes(self.source_bytes)
        resolved.write_text(self.to_json_text(), encoding="utf-8")
        return source, resolved


def _suite_view(
    role: str,
    ref_path: Path,
    split_override: str | None,
    manifest_path: Path,
    field_name: str,
) -> tuple[ResolvedSuite, _Loaded]:
    path = _resolve_ref(ref_path, manifest_path)
    loaded = _read_json_object(
        path, referenced_by=manifest_path, ref_field=field_name, ref=ref_path
    )
    own_split = loaded.data.get("split_id")
    split = split_override if split_override is not None else own_split
    if split is not None and not isinstance(split, str):
        raise ConfigError("expected a string", file=_show(path), field="split_id")
    return ResolvedSuite(role, path, split, loaded.data), loaded


def _view_identity(view: ResolvedSuite) -> tuple[str, str | None]:
    tasks_dir = view.content.get("tasks_dir")
    if isinstance(tasks_dir, str):
        where = str(_resolve_ref(Path(tasks_dir), view.suite_config))
    else:
        where = str(view.suite_config)
    return where, view.split_id


def resolve_manifest(path: Path | str) -> ResolvedManifest:
    """Load, validate, hash and resolve one experiment manifest and every file it references.

    Raises ConfigError naming the offending file and field: the referencing file for a missing
    file, the file itself for invalid JSON (with line/column) or a schema problem.
    """
    manifest_path = Path(path).resolve()
    loaded_manifest = _read_json_object(manifest_path)
    manifest: ExperimentManifest = _validate(ExperimentManifest, loaded_manifest)
    files: dict[str, FileRecord] = {"manifest": loaded_manifest.record}
    shown_manifest = _show(manifest_path)

    # layer 3: SUT config, then its profiles (relative to the SUT config)
    sut_path = _resolve_ref(manifest.sut.sut_config, manifest_path)
    loaded_sut = _read_json_object(
        sut_path,
        referenced_by=manifest_path,
        ref_field="sut.sut_config",
        ref=manifest.sut.sut_config,
    )
    raw_sut: SutConfig = _validate(SutConfig, loaded_sut)  # spellings as written, for messages
    sut = _absolute_sut(raw_sut, sut_path)
    files["sut_config"] = loaded_sut.record

    launch_profile: SystemProfile | None = None
    if sut.launch_profile is not None:
        loaded = _read_json_object(
            sut.launch_profile,
            referenced_by=sut_path,
            ref_field="launch_profile",
            ref=raw_sut.launch_profile,
        )
        launch_profile = _validate(SystemProfile, loaded)
        files["launch_profile"] = loaded.record
    _check_launch_profile(sut, launch_profile, sut_path)
    loaded = _read_json_object(
        sut.sum_profile, referenced_by=sut_path, ref_field="sum_profile", ref=raw_sut.sum_profile
    )
    sum_profile: SystemProfile = _validate(SystemProfile, loaded)
    files["sum_profile"] = loaded.record

    # layer 1: suite configs (relative to the manifest)
    ev = manifest.evaluation
    optimize, loaded = _suite_view(
        "optimize",
        ev.optimize.suite_config,
        ev.optimize.split_id,
        manifest_path,
        "evaluation.optimize.suite_config",
    )
    files["optimize_suite"] = loaded.record
    held_out: ResolvedSuite | None = None
    if ev.held_out.required:
        assert ev.held_out.suite_config is not None  # HeldOut validation guarantees it
        held_out, loaded = _suite_view(
            "held_out",
            ev.held_out.suite_config,
            ev.held_out.split_id,
            manifest_path,
            "evaluation.held_out.suite_config",
        )
        files["held_out_suite"] = loaded.record
        if _view_identity(held_out) == _view_identity(optimize):
            raise ConfigError(
                "the held-out view is the same suite and split as the optimize view "
                f"(split {held_out.split_id!r}); held-out tasks must never be optimized on",
                file=shown_manifest,
                field="evaluation.held_out.split_id",
            )

    # mutation policy
    policy = manifest.mutation_policy
    boundary_path: Path | None = None
    boundary: dict[str, Any] | None = None
    if policy.boundary is not None:
        boundary_path = _resolve_ref(policy.boundary, manifest_path)
        loaded = _read_json_object(
            boundary_path,
            referenced_by=manifest_path,
            ref_field="mutation_policy.boundary",
            ref=policy.boundary,
        )
        boundary = loaded.data
        files["boundary"] = loaded.record
    if policy.source == "sum_profile" and not sum_profile.mutable_root:
        raise ConfigError(
            "mutation_policy.source is 'sum_profile' but this target-agent profile declares "
            "no mutable_root",
            file=_show(sut.sum_profile),
            field="mutable_root",
        )

    # baseline and output
    repo = _resolve_ref(manifest.baseline.repo, manifest_path)
    base_commit = resolve_base_commit(repo, manifest.baseline.base_commit, manifest=manifest_path)
    output = _resolve_ref(manifest.output, manifest_path)
    if _within(output, repo):
        raise ConfigError(
            f"output directory {output} lies inside the baseline repository {repo}",
            file=shown_manifest,
            field="output",
        )

    resolved = manifest.model_copy(
        update={
            "sut": SutRef(sut_config=sut_path),
            "baseline": manifest.baseline.model_copy(
                update={"repo": repo, "base_commit": base_commit}
            ),
            "evaluation": ev.model_copy(
                update={
                    "optimize": SuiteRef(
                        suite_config=optimize.suite_config, split_id=optimize.split_id
                    ),
                    "held_out": ev.held_out.model_copy(
                        update={
                            "suite_config": held_out.suite_config if held_out else None,
                            "split_id": held_out.split_id if held_out else None,
                        }
                    ),
                }
            ),
            "mutation_policy": policy.model_copy(update={"boundary": boundary_path}),
            "output": output,
        }
    )
    return ResolvedManifest(
        manifest_path=manifest_path,
        source_bytes=loaded_manifest.raw,
        manifest=resolved,
        sut=sut,
        launch_profile=launch_profile,
        sum_profile=sum_profile,
        optimize=optimize,
        held_out=held_out,
        boundary=boundary,
        base_commit_spec=manifest.baseline.base_commit,
        files=files,
    )


__all__ = [
    "RESOLVED_MANIFEST_NAME",
    "RESOLVED_SCHEMA",
    "SOURCE_MANIFEST_NAME",
    "Baseline",
    "Evaluation",
    "ExperimentManifest",
    "FileRecord",
    "HeldOut",
    "MetaAgentSpec",
    "MutationPolicy",
    "ResolvedManifest",
    "ResolvedSuite",
    "SuiteRef",
    "SutConfig",
    "SutRef",
    "TargetBudget",
    "load_sut_config",
    "load_system_profile",
    "resolve_manifest",
    "resolve_base_commit",
]
