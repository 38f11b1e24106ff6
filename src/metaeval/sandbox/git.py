"""The one git helper: run git through the process helper, with git's error text on failure.

Every git command metaeval runs reads no configuration that an agent or a benchmark could
have written and runs no program named by configuration:

- the host's system and global config files are not read (`GIT_CONFIG_NOSYSTEM`,
  `GIT_CONFIG_GLOBAL=/dev/null`), and every `GIT_*` variable of the caller is dropped;
- `SAFE_CONFIG` switches off every configuration key git would turn into a command for the
  commands metaeval uses: fsmonitor, hooks, pagers, external diff and textconv, editors,
  credential helpers, ssh and proxy commands, signing programs, automatic gc;
- a tree an agent wrote (an improve worktree) is reached with `git_tree`: an explicit
  `GIT_DIR` the harness made and owns and `GIT_WORK_TREE`, so no `.git` file or directory
  inside the tree is ever consulted (see `metaeval.protocols.improve.gitops`).
"""

from __future__ import annotations

import os
from pathlib import Path

from metaeval.errors import MetaevalError
from metaeval.sandbox.process import ExecResult, run_process

IDENTITY = ("-c", "user.name=metaeval", "-c", "user.email=metaeval@localhost")
"""Committer identity for commits metaeval makes (no global git config needed)."""

GIT_TIMEOUT_S = 300.0
MAX_GIT_OUTPUT_BYTES = 512 * 1024 * 1024  # diffs of binary candidates can be large

SAFE_CONFIG = (
    "-c", "core.fsmonitor=false",
    "-c", "core.hooksPath=/dev/null",
    "-c", "core.pager=cat",
    "-c", "core.editor=false",
    "-c", "core.askPass=",
    "-c", "core.sshCommand=false",
    "-c", "core.gitProxy=",
    "-c", "core.untrackedCache=false",
    "-c", "core.attributesFile=/dev/null",
    "-c", "diff.external=",
    "-c", "diff.ignoreSubmodules=all",
    "-c", "submodule.recurse=false",
    "-c", "status.submoduleSummary=false",
    "-c", "credential.helper=",
    "-c", "commit.gpgSign=false",
    "-c", "tag.gpgSign=false",
    "-c", "gpg.program=false",
    "-c", "sequence.editor=false",
    "-c", "gc.auto=0",
    "-c", "maintenance.auto=false",
    "-c", "protocol.allow=never",
    "-c", "protocol.file.allow=always",
)  # fmt: skip
"""Command-line settings (they override every config file) that leave git no command to run."""

_SAFE_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_PAGER": "cat",
    "GIT_OPTIONAL_LOCKS": "0",
}


class GitError(MetaevalError):
    """A git command failed (the message carries git's own error text)."""


def git_env(**location: str) -> dict[str, str]:
    """The caller's environment without any `GIT_*` variable, plus the safe settings and the
    given locations (e.g. `GIT_DIR`, `GIT_WORK_TREE`)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    return {**env, **_SAFE_ENV, **location}


def git_result(
    repo: Path, *args: str, input_text: str | None = None, timeout_s: float = GIT_TIMEOUT_S
) -> ExecResult:
    """Run `git -C repo ARGS` and return its result whatever the exit code.

    returncode 127 means git could not be started (not installed).
    """
    repo = Path(
        repo
    ).absolute()  # `-C` and the working directory must not both apply a relative path
    return _run_git(["-C", str(repo), *args], repo, git_env(), input_text, timeout_s)


def git_tree(
    git_dir: Path,
    work_tree: Path,
    *args: str,
    input_text: str | None = None,
    timeout_s: float = GIT_TIMEOUT_S,
) -> str:
    """Run git on `work_tree` with the repository metadata at `git_dir` (both explicit, so
    nothing inside the work tree decides which repository or configuration is used)."""
    work_tree = Path(work_tree).absolute()
    env = git_env(GIT_DIR=str(Path(git_dir).absolute()), GIT_WORK_TREE=str(work_tree))
    result = _run_git(list(args), work_tree, env, input_text, timeout_s)
    return _checked(result, args, work_tree)


def _run_git(
    args: list[str], where: Path, env: dict[str, str], input_text: str | None, timeout_s: float
) -> ExecResult:
    return run_process(
        ["git", *IDENTITY, *SAFE_CONFIG, *args],
        cwd=where if where.is_dir() else Path.cwd(),
        env=env,
        timeout_s=timeout_s,
        stdin=input_text,
        max_output_bytes=MAX_GIT_OUTPUT_BYTES,
    )


def _checked(result: ExecResult, args: tuple[str, ...], where: Path) -> str:
    if result.returncode != 0 or result.stdout_truncated:
        why = "timed out" if result.timed_out else result.stderr.strip()[-2000:]
        raise GitError(f"git {' '.join(args)} failed in {where}: {why}")
    return result.stdout


def git(repo: Path, *args: str, input_text: str | None = None) -> str:
    """Run git in `repo` and return its stdout; raise GitError naming the command on failure."""
    return _checked(git_result(repo, *args, input_text=input_text), args, repo)
