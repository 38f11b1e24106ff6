"""The baseline commit of an experiment: `baseline.base_commit` (7-40 hex digits or `HEAD`)
looked up in the baseline repository and pinned to its full 40-hex SHA."""

from __future__ import annotations

import re
from pathlib import Path

from metaeval.errors import ConfigError
from metaeval.protocols.improve.manifest_files import shown_path
from metaeval.sandbox.git import git_result
from metaeval.sandbox.process import ExecResult


def _git(repo: Path, *args: str) -> ExecResult:
    return git_result(repo, *args, timeout_s=60)


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[0] if lines else ""


def resolve_base_commit(repo: Path, spec: str, *, manifest: Path | None = None) -> str:
    """The full SHA of commit `spec` (hex prefix or HEAD) in the git repository rooted at `repo`."""
    where = shown_path(manifest) if manifest else None
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
