"""The resolved run contract of one recursive run: what `resolved_manifest.json` holds.

`resolve.resolve_manifest` builds a `ResolvedManifest`: the manifest with every path absolute,
the effective split ids, the full base commit, every file it reached with its sha256. Its
`to_json()` is written to a bundle as `resolved_manifest.json`; the manifest's own bytes are
written verbatim as `source_manifest.json`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from metaeval.protocols.improve.config import ExperimentManifest, SutConfig, SutRef, TargetBudget
from metaeval.protocols.improve.profiles import SystemProfile

RESOLVED_SCHEMA = "metaeval.improve.resolved_manifest/1"
SOURCE_MANIFEST_NAME = "source_manifest.json"
RESOLVED_MANIFEST_NAME = "resolved_manifest.json"


@dataclass(frozen=True)
class FileRecord:
    """One file that went into the run contract: absolute path and sha256 of its bytes."""

    path: Path
    sha256: str

    def to_json(self) -> dict[str, str]:
        return {"path": str(self.path), "sha256": self.sha256}


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
        assert self.manifest.output is not None  # resolution fills in the default
        return self.manifest.output

    @property
    def target_budget(self) -> TargetBudget:
        assert self.manifest.target_budget is not None  # resolution fills in the default
        return self.manifest.target_budget

    @property
    def sut_source(self) -> str:
        """Where the SUT config was written: its file, or the manifest (inline `sut`)."""
        sut = self.manifest.sut
        return str(sut.sut_config) if isinstance(sut, SutRef) else str(self.manifest_path)

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
                "sut_config": str(m.sut.sut_config) if isinstance(m.sut, SutRef) else None,
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
            "target_budget": self.target_budget.model_dump(mode="json"),
            "mutation_policy": {
                "source": policy.source,
                "boundary": str(policy.boundary) if isinstance(policy.boundary, Path) else None,
                "boundary_content": self.boundary,
                "mutable_root": self.sum_profile.mutable_root,
                "allowed_mutation_paths": list(self.sum_profile.allowed_mutation_paths),
            },
            "output": str(self.output),
            "seed": m.seed,
            # population search (issue 41): recorded only when it is not the default
            **({} if m.search.is_default() else {"search": self.search_json()}),
        }

    def search_json(self) -> dict[str, Any]:
        """The search policy as it runs: its seed resolved (the manifest's when unset)."""
        search = self.manifest.search
        seed = self.manifest.seed if search.seed is None else search.seed
        return {**search.model_dump(mode="json"), "seed": seed}

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


__all__ = [
    "RESOLVED_MANIFEST_NAME",
    "RESOLVED_SCHEMA",
    "SOURCE_MANIFEST_NAME",
    "FileRecord",
    "ResolvedManifest",
    "ResolvedSuite",
]
