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

from dataclasses import replace
from pathlib import Path
from typing import Any

from metaeval.errors import ConfigError
from metaeval.protocols.improve.base_commit import resolve_base_commit
from metaeval.protocols.improve.config import (
    Evaluation,
    ExperimentManifest,
    SuiteRef,
    SutConfig,
    SutRef,
    TargetBudget,
)
from metaeval.protocols.improve.contract import FileRecord, ResolvedManifest, ResolvedSuite
from metaeval.protocols.improve.manifest_files import (
    LoadedFile,
    absolute_sut,
    read_json_object,
    resolve_ref,
    shown_path,
    validate_strict,
)
from metaeval.protocols.improve.profiles import TOOLLOOP_TARGET, SystemProfile
from metaeval.protocols.improve.suites import DEFAULT_STEPS, DEFAULT_TASK_TIMEOUT_S
from metaeval.protocols.improve.suites import MANIFEST as SUITE_MANIFEST


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


def _within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _suite_view(
    role: str,
    ref_path: Path,
    split_override: str | None,
    manifest_path: Path,
    field_name: str,
) -> tuple[ResolvedSuite, LoadedFile]:
    path = resolve_ref(ref_path, manifest_path)
    if path.is_dir() and (path / SUITE_MANIFEST).is_file():
        # a suite directory: its suite.json is hashed, the suite config is implied
        loaded = read_json_object(path / SUITE_MANIFEST)
        content = {"name": path.name, "tasks_dir": str(path)}
        return ResolvedSuite(role, path, split_override, content), loaded
    loaded = read_json_object(path, referenced_by=manifest_path, ref_field=field_name, ref=ref_path)
    own_split = loaded.data.get("split_id")
    split = split_override if split_override is not None else own_split
    if split is not None and not isinstance(split, str):
        raise ConfigError("expected a string", file=shown_path(path), field="split_id")
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
        sut_path = resolve_ref(manifest.sut.sut_config, manifest_path)
        loaded_sut = read_json_object(
            sut_path,
            referenced_by=manifest_path,
            ref_field="sut.sut_config",
            ref=manifest.sut.sut_config,
        )
        raw_sut: SutConfig = validate_strict(SutConfig, loaded_sut)  # spellings as written
        files["sut_config"] = loaded_sut.record
        prefix = ""
    else:
        sut_path, raw_sut, prefix = manifest_path, manifest.sut, "sut."
    sut = absolute_sut(raw_sut, sut_path)
    profiles: list[SystemProfile | None] = []
    for role, ref, raw in (
        ("launch_profile", sut.launch_profile, raw_sut.launch_profile),
        ("sum_profile", sut.sum_profile, raw_sut.sum_profile),
    ):
        if isinstance(ref, Path):
            loaded = read_json_object(
                ref,
                referenced_by=sut_path,
                ref_field=prefix + role,
                ref=raw,  # type: ignore[arg-type]
            )
            profiles.append(validate_strict(SystemProfile, loaded))
            files[role] = loaded.record
        else:
            profiles.append(ref)
    return sut, profiles[0], profiles[1] or TOOLLOOP_TARGET


def _view_identity(view: ResolvedSuite) -> tuple[str, str | None]:
    tasks_dir = view.content.get("tasks_dir")
    if isinstance(tasks_dir, str):
        where = str(resolve_ref(Path(tasks_dir), view.suite_config))
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
            file=shown_path(manifest_path),
            field="evaluation.held_out.split_id",
        )
    return optimize, held_out


def _resolve_boundary(
    manifest: ExperimentManifest, manifest_path: Path, files: dict[str, FileRecord]
) -> tuple[Path | None, dict[str, Any] | None]:
    """The mutation policy's boundary: (its file, its content as written), or inline."""
    policy = manifest.mutation_policy
    if isinstance(policy.boundary, Path):
        boundary_path = resolve_ref(policy.boundary, manifest_path)
        loaded = read_json_object(
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
    loaded_manifest = read_json_object(manifest_path)
    manifest: ExperimentManifest = validate_strict(ExperimentManifest, loaded_manifest)
    files: dict[str, FileRecord] = {"manifest": loaded_manifest.record}

    sut, launch_profile, sum_profile = _resolve_sut(manifest, manifest_path, files)
    sut_path = manifest_path if not isinstance(manifest.sut, SutRef) else files["sut_config"].path
    _check_launch_profile(sut, launch_profile, sut_path)

    optimize, held_out = _resolve_views(manifest, manifest_path, files)
    boundary_path, boundary = _resolve_boundary(manifest, manifest_path, files)
    if manifest.mutation_policy.source == "sum_profile" and not sum_profile.mutable_root:
        raise ConfigError(
            "mutation_policy.source is 'sum_profile' but this target-agent profile declares "
            "no mutable_root",
            file=shown_path(sut.sum_profile if isinstance(sut.sum_profile, Path) else sut_path),
            field="mutable_root",
        )
    repo, base_commit, output = _pin_baseline(manifest, manifest_path)
    resolved = manifest.model_copy(
        update={
            "sut": SutRef(sut_config=sut_path) if isinstance(manifest.sut, SutRef) else sut,
            "baseline": manifest.baseline.model_copy(
                update={"repo": repo, "base_commit": base_commit}
            ),
            "evaluation": _resolved_evaluation(manifest, optimize, held_out),
            "mutation_policy": manifest.mutation_policy.model_copy(
                update={"boundary": boundary_path or manifest.mutation_policy.boundary}
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


DEFAULT_MANIFEST_NAME = "manifest"
"""The file name `metaeval improve init` gives a manifest: its bundle is named after its
directory instead."""


def default_output(manifest_path: Path) -> Path:
    """The bundle directory of a manifest that names no `output`: `runs/<experiment>` under
    the current directory, as every other metaeval command writes its run (so `metaeval view
    runs/` finds it). The experiment is the manifest's file name without `.json`, or its
    directory's name for a file named `manifest.json`."""
    name = manifest_path.stem
    if name == DEFAULT_MANIFEST_NAME and manifest_path.resolve().parent.name:
        name = manifest_path.resolve().parent.name
    return (Path.cwd() / "runs" / name).resolve()


def _pin_baseline(manifest: ExperimentManifest, manifest_path: Path) -> tuple[Path, str, Path]:
    """The baseline repository, its commit pinned to a full SHA, and the output directory
    (which may not lie inside the repository)."""
    repo = resolve_ref(manifest.baseline.repo, manifest_path)
    base_commit = resolve_base_commit(repo, manifest.baseline.base_commit, manifest=manifest_path)
    output = (
        resolve_ref(manifest.output, manifest_path)
        if manifest.output is not None
        else default_output(manifest_path)
    )
    if _within(output, repo):
        raise ConfigError(
            f"output directory {output} lies inside the baseline repository {repo}",
            file=shown_path(manifest_path),
            field="output",
        )
    return repo, base_commit, output


def _resolved_evaluation(
    manifest: ExperimentManifest, optimize: ResolvedSuite, held_out: ResolvedSuite | None
) -> Evaluation:
    """The manifest's evaluation block with its suite references resolved."""
    return manifest.evaluation.model_copy(
        update={
            "optimize": SuiteRef(suite_config=optimize.suite_config, split_id=optimize.split_id),
            "held_out": manifest.evaluation.held_out.model_copy(
                update={
                    "suite_config": held_out.suite_config if held_out else None,
                    "split_id": held_out.split_id if held_out else None,
                }
            ),
        }
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


__all__ = ["resolve_manifest", "with_models"]
