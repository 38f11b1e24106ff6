"""Resolve an experiment manifest and every file it reaches into one run contract.

`resolve_manifest(path)` loads the manifest and every file it reaches, resolves every relative
reference against the directory of the file that contains it (never the current directory),
validates each file, hashes each file's bytes and pins the baseline commit to a full SHA.

Path fields that are *not* config-file references are kept as written: a profile's `cwd`,
`mutable_root` and `allowed_mutation_paths` are relative to the scaffold (the candidate or
optimizer worktree) and only mean something at launch time.

`baseline.base_commit` is 7-40 hex digits or the literal `HEAD`; either way it is looked up in
the baseline repository at resolution time and recorded as the full 40-hex SHA (the spelling
as written is kept as `base_commit_spec`). `HEAD` is convenient for a freshly materialized
target repo (`metaeval improve init-target`); the resolved manifest still pins one commit.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from metaeval.config_files import parse_json, read_text, validation_error
from metaeval.errors import ConfigError
from metaeval.protocols.improve.config import (
    ExperimentManifest,
    SuiteRef,
    SutConfig,
    SutRef,
    TargetBudget,
)
from metaeval.protocols.improve.contract import FileRecord, ResolvedManifest, ResolvedSuite
from metaeval.protocols.improve.profiles import TOOLLOOP_TARGET, SystemProfile
from metaeval.protocols.improve.suites import DEFAULT_STEPS, DEFAULT_TASK_TIMEOUT_S
from metaeval.protocols.improve.suites import MANIFEST as SUITE_MANIFEST
from metaeval.sandbox.git import git_result
from metaeval.sandbox.process import ExecResult


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
    text = read_text(path)  # a regular file, UTF-8, size-capped
    raw = text.encode("utf-8")  # the bytes as read: decoding valid UTF-8 is lossless
    data = parse_json(text, _show(path))  # duplicate keys, NaN and Infinity refused
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
        raise validation_error(exc, file=_show(loaded.path)) from None


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
            file=str(sut.launch_profile if isinstance(sut.launch_profile, Path) else sut_path),
            field="cwd",
        )


def _absolute_sut(sut: SutConfig, sut_path: Path) -> SutConfig:
    """`sut` with its profile paths made absolute against the file that holds it."""

    def absolute(ref: Path | SystemProfile | None) -> Path | SystemProfile | None:
        return _resolve_ref(ref, sut_path) if isinstance(ref, Path) else ref

    return sut.model_copy(
        update={
            "launch_profile": absolute(sut.launch_profile),
            "sum_profile": absolute(sut.sum_profile),
        }
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


def _suite_view(
    role: str,
    ref_path: Path,
    split_override: str | None,
    manifest_path: Path,
    field_name: str,
) -> tuple[ResolvedSuite, _Loaded]:
    path = _resolve_ref(ref_path, manifest_path)
    if path.is_dir() and (path / SUITE_MANIFEST).is_file():
        # a suite directory: its suite.json is hashed, the suite config is implied
        loaded = _read_json_object(path / SUITE_MANIFEST)
        content = {"name": path.name, "tasks_dir": str(path)}
        return ResolvedSuite(role, path, split_override, content), loaded
    loaded = _read_json_object(
        path, referenced_by=manifest_path, ref_field=field_name, ref=ref_path
    )
    own_split = loaded.data.get("split_id")
    split = split_override if split_override is not None else own_split
    if split is not None and not isinstance(split, str):
        raise ConfigError("expected a string", file=_show(path), field="split_id")
    return ResolvedSuite(role, path, split, loaded.data), loaded


def _suite_budget(view: ResolvedSuite) -> TargetBudget:
    """The target budget a manifest leaves out: the optimize suite config's (or its
    defaults)."""
    return TargetBudget.model_validate(
        {
            "max_steps_per_task": view.content.get("max_steps_per_task", DEFAULT_STEPS),
            "task_timeout_s": view.content.get("task_timeout_s", DEFAULT_TASK_TIMEOUT_S),
        }
    )


def _resolve_sut(
    manifest: ExperimentManifest, manifest_path: Path, files: dict[str, FileRecord]
) -> tuple[SutConfig, SystemProfile | None, SystemProfile]:
    """The SUT config (from its file, or inline in the manifest) and its two profiles (from
    files relative to the file that names them, inline, or the default target)."""
    if isinstance(manifest.sut, SutRef):
        sut_path = _resolve_ref(manifest.sut.sut_config, manifest_path)
        loaded_sut = _read_json_object(
            sut_path,
            referenced_by=manifest_path,
            ref_field="sut.sut_config",
            ref=manifest.sut.sut_config,
        )
        raw_sut: SutConfig = _validate(SutConfig, loaded_sut)  # spellings as written
        files["sut_config"] = loaded_sut.record
        prefix = ""
    else:
        sut_path, raw_sut, prefix = manifest_path, manifest.sut, "sut."
    sut = _absolute_sut(raw_sut, sut_path)
    profiles: list[SystemProfile | None] = []
    for role, ref, raw in (
        ("launch_profile", sut.launch_profile, raw_sut.launch_profile),
        ("sum_profile", sut.sum_profile, raw_sut.sum_profile),
    ):
        if isinstance(ref, Path):
            loaded = _read_json_object(
                ref,
                referenced_by=sut_path,
                ref_field=prefix + role,
                ref=raw,  # type: ignore[arg-type]
            )
            profiles.append(_validate(SystemProfile, loaded))
            files[role] = loaded.record
        else:
            profiles.append(ref)
    return sut, profiles[0], profiles[1] or TOOLLOOP_TARGET


def _view_identity(view: ResolvedSuite) -> tuple[str, str | None]:
    tasks_dir = view.content.get("tasks_dir")
    if isinstance(tasks_dir, str):
        where = str(_resolve_ref(Path(tasks_dir), view.suite_config))
    else:
        where = str(view.suite_config)
    return where, view.split_id


def _resolve_views(
    manifest: ExperimentManifest, manifest_path: Path, files: dict[str, FileRecord]
) -> tuple[ResolvedSuite, ResolvedSuite | None]:
    """The optimize and (when required) held-out views; they may not be the same view."""
    ev = manifest.evaluation
    optimize, loaded = _suite_view(
        "optimize",
        ev.optimize.suite_config,
        ev.optimize.split_id,
        manifest_path,
        "evaluation.optimize.suite_config",
    )
    files["optimize_suite"] = loaded.record
    if not ev.held_out.required:
        return optimize, None
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
            file=_show(manifest_path),
            field="evaluation.held_out.split_id",
        )
    return optimize, held_out


def _resolve_boundary(
    manifest: ExperimentManifest, manifest_path: Path, files: dict[str, FileRecord]
) -> tuple[Path | None, dict[str, Any] | None]:
    """The mutation policy's boundary: (its file, its content as written), or inline."""
    policy = manifest.mutation_policy
    if isinstance(policy.boundary, Path):
        boundary_path = _resolve_ref(policy.boundary, manifest_path)
        loaded = _read_json_object(
            boundary_path,
            referenced_by=manifest_path,
            ref_field="mutation_policy.boundary",
            ref=policy.boundary,
        )
        files["boundary"] = loaded.record
        return boundary_path, loaded.data
    if policy.boundary is not None:  # inline in the manifest: the fields it sets
        return None, policy.boundary.model_dump(mode="json", exclude_unset=True)
    return None, None


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

    sut, launch_profile, sum_profile = _resolve_sut(manifest, manifest_path, files)
    sut_path = manifest_path if not isinstance(manifest.sut, SutRef) else files["sut_config"].path
    _check_launch_profile(sut, launch_profile, sut_path)

    optimize, held_out = _resolve_views(manifest, manifest_path, files)
    policy = manifest.mutation_policy
    boundary_path, boundary = _resolve_boundary(manifest, manifest_path, files)
    if policy.source == "sum_profile" and not sum_profile.mutable_root:
        raise ConfigError(
            "mutation_policy.source is 'sum_profile' but this target-agent profile declares "
            "no mutable_root",
            file=_show(sut.sum_profile if isinstance(sut.sum_profile, Path) else sut_path),
            field="mutable_root",
        )

    # baseline and output
    repo = _resolve_ref(manifest.baseline.repo, manifest_path)
    base_commit = resolve_base_commit(repo, manifest.baseline.base_commit, manifest=manifest_path)
    output = _resolve_ref(manifest.output or Path("runs") / manifest_path.stem, manifest_path)
    if _within(output, repo):
        raise ConfigError(
            f"output directory {output} lies inside the baseline repository {repo}",
            file=shown_manifest,
            field="output",
        )

    resolved = manifest.model_copy(
        update={
            "sut": SutRef(sut_config=sut_path) if isinstance(manifest.sut, SutRef) else sut,
            "baseline": manifest.baseline.model_copy(
                update={"repo": repo, "base_commit": base_commit}
            ),
            "evaluation": manifest.evaluation.model_copy(
                update={
                    "optimize": SuiteRef(
                        suite_config=optimize.suite_config, split_id=optimize.split_id
                    ),
                    "held_out": manifest.evaluation.held_out.model_copy(
                        update={
                            "suite_config": held_out.suite_config if held_out else None,
                            "split_id": held_out.split_id if held_out else None,
                        }
                    ),
                }
            ),
            "mutation_policy": policy.model_copy(
                update={"boundary": boundary_path or policy.boundary}
            ),
            "target_budget": manifest.target_budget or _suite_budget(optimize),
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


def with_models(
    resolved: ResolvedManifest,
    model: str | None = None,
    *,
    target_model: str | None = None,
    meta_model: str | None = None,
) -> ResolvedManifest:
    """`resolved` with the models of `improve run -M/--target-model/--meta-model`.

    `model` is the model of both the target (`sum.model`) and the meta-agent
    (`sut.meta_agent.model`): the paper's setting, where the target inherits the meta-agent's
    backing model. A meta-agent without a model (scripted) keeps none. `target_model` and
    `meta_model` set one side and win over `model`."""
    target = target_model or model
    meta = meta_model or (model if resolved.sut.meta_agent.agent != "scripted" else None)
    manifest, sut = resolved.manifest, resolved.sut
    if target:
        manifest = manifest.model_copy(
            update={"sum": manifest.sum.model_copy(update={"model": target})}
        )
    if meta:
        sut = sut.model_copy(
            update={"meta_agent": sut.meta_agent.model_copy(update={"model": meta})}
        )
    return replace(resolved, manifest=manifest, sut=sut)


__all__ = [
    "with_models",
    "load_sut_config",
    "load_system_profile",
    "resolve_base_commit",
    "resolve_manifest",
]
