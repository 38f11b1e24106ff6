"""Git operations of the trial loop: worktrees, candidate diffs, commits kept under refs.

A trial's worktree is written by the meta-agent, so nothing inside it may steer git: after
the worktree is made, git is only ever run on it with the repository metadata the harness
recorded (`TrialTree.git_dir`, under the target repository's own `.git/worktrees/`) and
`GIT_WORK_TREE`, never by discovering a `.git` in the tree, and always with
`metaeval.sandbox.git.SAFE_CONFIG`. A meta-agent that rewrites the worktree's `.git` file
or plants another `.git` anywhere in the tree makes its trial invalid (`tampered`), and git
is not run on that tree at all. Every command goes through the one git helper.
"""

from __future__ import annotations

import os
import shutil
import stat
import threading
from dataclasses import dataclass
from pathlib import Path

from metaeval.sandbox.git import GitError, git, git_result, git_tree
from metaeval.tasks.safe_files import walk_tree

CONTEXT_DIR = ".aie_bench_recursive"
_WORKTREES = threading.Lock()
"""Serializes adding and pruning worktrees of one repository: trials of a round run at once."""

__all__ = [
    "CONTEXT_DIR",
    "GitError",
    "TrialTree",
    "add_worktree",
    "apply_patch",
    "candidate_diff",
    "commit_candidate",
    "git",
    "left_out_files",
    "remove_worktree",
    "resolve_commit",
    "tampered",
]


@dataclass(frozen=True)
class TrialTree:
    """A worktree the harness made: where it is, its metadata directory (outside the tree,
    harness-owned) and the bytes of the `.git` file git wrote into it."""

    path: Path
    git_dir: Path
    dot_git: bytes


def resolve_commit(repo: Path, rev: str) -> str:
    return git(repo, "rev-parse", "--verify", f"{rev}^{{commit}}").strip()


def add_worktree(repo: Path, path: Path, commit: str) -> TrialTree:
    """A detached worktree of `commit` at `path` (an old one at that path is removed first)."""
    remove_worktree(repo, path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _WORKTREES:
        git(repo, "worktree", "add", "--detach", "--force", str(path), commit)
    # Read before anything else touches the tree: from here on this is the only truth.
    git_dir = Path(git(path, "rev-parse", "--absolute-git-dir").strip())
    return TrialTree(path=path, git_dir=git_dir, dot_git=(path / ".git").read_bytes())


def remove_worktree(repo: Path, path: Path) -> None:
    """Delete the worktree at `path` (links inside are removed, never followed) and let git
    forget it. Git is not run inside the tree, which an agent may have changed."""
    if os.path.lexists(path):
        if path.is_symlink() or not path.is_dir():
            path.unlink()
        else:
            shutil.rmtree(path, ignore_errors=True)
    with _WORKTREES:
        git_result(repo, "worktree", "prune")


def tampered(tree: TrialTree) -> str | None:
    """Why git must not be run on the tree, or None: its `.git` is no longer the file git
    wrote, or another `.git` (file, directory or link) appears anywhere below it."""
    dot_git = tree.path / ".git"
    try:
        info = os.lstat(dot_git)
        same = stat.S_ISREG(info.st_mode) and dot_git.read_bytes() == tree.dot_git
    except OSError:
        same = False
    if not same:
        return "the worktree's .git was changed, replaced or removed"
    for entry in walk_tree(tree.path):  # iterative, never through a link
        if entry.rel != ".git" and entry.path.name == ".git":
            return f"a git repository entry was planted at '{entry.rel}'"
    return None


def candidate_diff(tree: TrialTree) -> str:
    """Everything the meta-agent changed (tracked, new and deleted files, modes, binaries),
    excluding the benchmark-owned context directory."""
    git_tree(tree.git_dir, tree.path, "add", "-A", "--", ".", f":(exclude){CONTEXT_DIR}")
    return git_tree(
        tree.git_dir,
        tree.path,
        "diff",
        "--cached",
        "--binary",
        "--no-color",
        "--no-ext-diff",
        "--no-textconv",
        "--ignore-submodules=all",
        "HEAD",
    )


def left_out_files(tree: TrialTree) -> list[str]:
    """Files in the tree that the candidate patch does not carry: ignored by the target's
    `.gitignore` (run after `candidate_diff`, which stages everything else). They exist only in
    the meta-agent's working copy, never in the evaluated commit."""
    out = git_tree(
        tree.git_dir,
        tree.path,
        "ls-files",
        "-z",
        "--others",
        "--ignored",
        "--exclude-standard",
        "--",
        ".",
        f":(exclude){CONTEXT_DIR}",
    )
    return sorted(name for name in out.split("\0") if name)


def commit_candidate(repo: Path, tree: TrialTree, message: str, ref: str) -> str:
    """Commit the staged candidate and keep it reachable under `ref` in the main repository."""
    git_tree(tree.git_dir, tree.path, "commit", "--no-verify", "-q", "-m", message)
    sha = git_tree(tree.git_dir, tree.path, "rev-parse", "HEAD").strip()
    git(repo, "update-ref", ref, sha)
    return sha


def apply_patch(tree: TrialTree, patch: str) -> None:
    """Apply a unified diff (contract patch/1) in the worktree."""
    git_tree(
        tree.git_dir, tree.path, "apply", "--binary", "--whitespace=nowarn", "-", input_text=patch
    )
