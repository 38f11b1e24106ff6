"""The relaxed compile probe (paper Appendix G, Table 10) and its table.

The primary probe runs the task's `compile_probe` at the artifact root. An artifact that fails
it may hold a buildable project one directory down (a layout failure, not a source failure).
For such an artifact the relaxed probe looks for the task's `project_file` (e.g. Cargo.toml):
when the root has none and exactly one nested copy exists, that nested project is copied to a
fresh temporary workspace (its own build outputs, so nothing is left in the artifact) and the
same probe runs there in the sandbox. The outcome is recorded beside the strict one
(`validation.relaxed_probe`); it never changes `compile_pass` or the primary panel.

Outcomes: nested_pass, nested_fail, nested_timeout (a unique nested project, probed),
no_nested_project, several_nested_projects, root_project (the root has the project file:
the failure is not a layout one), not_configured (the task names no `project_file`).
"""

from __future__ import annotations

import tempfile
from pathlib import Path, PurePosixPath
from typing import Any

import polars as pl

from metaeval.protocols.buildfind.artifact.validation import compile_probe, structure
from metaeval.sandbox.workspace import Workspace

NESTED_PASS, NESTED_FAIL, NESTED_TIMEOUT = "nested_pass", "nested_fail", "nested_timeout"
NO_NESTED, SEVERAL_NESTED = "no_nested_project", "several_nested_projects"
ROOT_PROJECT, NOT_CONFIGURED = "root_project", "not_configured"
TABLE = "relaxed_probe"


def relaxed_probe(
    artifact: Path, project_file: str | None, command: str, timeout_s: float = 300
) -> dict[str, Any]:
    """The relaxed probe's record for an artifact that failed the root-level probe."""
    if not project_file:
        return {"outcome": NOT_CONFIGURED}
    files = structure(artifact)["file_list"]
    found = sorted(
        str(PurePosixPath(f).parent) for f in files if PurePosixPath(f).name == project_file
    )
    if "." in found:
        return {"outcome": ROOT_PROJECT, "project_file": project_file}
    if not found:
        return {"outcome": NO_NESTED, "project_file": project_file}
    if len(found) > 1:
        return {"outcome": SEVERAL_NESTED, "project_file": project_file, "nested": found}
    with tempfile.TemporaryDirectory(prefix="metaeval-relaxed-") as tmp:
        workspace = Workspace.create(Path(tmp) / "project", seed_from=artifact / found[0])
        probe = compile_probe(workspace, command, timeout_s)
    outcome = (
        NESTED_TIMEOUT
        if probe["timed_out"]
        else NESTED_PASS
        if probe["compile_pass"]
        else NESTED_FAIL
    )
    return {
        "outcome": outcome,
        "project_file": project_file,
        "nested": found[0],
        "returncode": probe["returncode"],
        "log_tail": probe["log_tail"],
    }


SLICES = (
    ("Primary root-level compile-probe exclusions", None),
    ("Unique nested project found", (NESTED_PASS, NESTED_FAIL, NESTED_TIMEOUT)),
    ("Nested project builds under relaxed probe", (NESTED_PASS,)),
    ("Nested project build failures", (NESTED_FAIL,)),
    ("Nested project build timeouts", (NESTED_TIMEOUT,)),
    ("No nested project found", (NO_NESTED,)),
    ("Several nested projects found", (SEVERAL_NESTED,)),
    ("Project file at the root (not a layout failure)", (ROOT_PROJECT,)),
    ("Relaxed probe not run", (NOT_CONFIGURED, None)),
)
"""Table 10's rows (its six, then the outcomes the paper's audit did not meet)."""


def relaxed_probe_table(builds: pl.DataFrame) -> pl.DataFrame:
    """Table 10 from the builds table: the ok builds that failed the root-level probe, by
    relaxed-probe outcome (null: not run, e.g. recorded before the relaxed probe existed)."""
    excluded = builds.filter((pl.col("status") == "ok") & ~pl.col("compile_pass").fill_null(False))
    outcomes = (
        excluded.get_column("relaxed_probe").to_list()
        if "relaxed_probe" in builds.columns
        else [None] * excluded.height
    )
    rows = [
        {
            "slice": name,
            "builds": len(outcomes) if wanted is None else sum(o in wanted for o in outcomes),
        }
        for name, wanted in SLICES
    ]
    return pl.DataFrame(rows, schema={"slice": pl.String, "builds": pl.Int64})
