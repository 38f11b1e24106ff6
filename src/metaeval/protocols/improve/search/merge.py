"""Merge: a candidate built from two parents.

A proposal may name a second parent (`MetaOutput.second_parent`, or the worktree's
`.aie_bench_recursive/second_parent` file for a lane that only edits). The trial's worktree holds
the first parent with the meta-agent's edits; the harness takes those edits as a diff, sets
the worktree to the three-way merge of the two parents' commits against their common
ancestor (`git merge-tree`), then applies the edits on top (three-way as well). A conflict in
either step is a `MergeConflict`: the trial is a recorded invalid one. The commit made from
the merged tree has both parents (`MERGE_HEAD`), and the patch checked against the mutation
boundary is the whole change from the first parent, as for any other candidate.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from metaeval.protocols.improve.gitops import CONTEXT_DIR, TrialTree, candidate_diff
from metaeval.sandbox.git import GitError, git_result, git_tree

SECOND_PARENT_FILE = "second_parent"
"""A meta-agent that edits its worktree (any lane) names a second parent by writing its id
into `.aie_bench_recursive/second_parent` (benchmark-owned, never part of the patch)."""
MAX_ID_BYTES = 200


def named_second_parent(worktree: Path) -> str | None:
    """The id in the worktree's `second_parent` file: its first line, stripped; None when the
    file is absent, empty, not a regular file (a link is not followed) or too long."""
    path = worktree / CONTEXT_DIR / SECOND_PARENT_FILE
    try:
        info = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_ID_BYTES:
        return None
    lines = path.read_text(errors="replace").strip().splitlines()
    return lines[0].strip() if lines else None


class MergeConflict(ValueError):
    """The two parents (or the meta-agent's edits and the merge) do not merge cleanly."""


def merge_into(repo: Path, tree: TrialTree, first: str, second: str) -> None:
    """Turn `tree` (the first parent plus edits) into merge(first, second) plus the edits."""
    edits = candidate_diff(tree)  # stages everything; the diff from the first parent
    merged = git_result(
        repo, "merge-tree", "--write-tree", "--name-only", "--no-messages", first, second
    )
    lines = merged.stdout.splitlines()
    if merged.returncode == 1:
        files = ", ".join(lines[1:]) or "unknown files"
        raise MergeConflict(f"the parents {first[:12]} and {second[:12]} conflict in {files}")
    if merged.returncode != 0 or not lines:
        raise GitError(f"git merge-tree failed: {merged.stderr.strip()}")
    git_tree(tree.git_dir, tree.path, "read-tree", "--reset", "-u", lines[0])
    if edits:
        try:
            git_tree(
                tree.git_dir,
                tree.path,
                "apply",
                "--3way",
                "--index",
                "--binary",
                "--whitespace=nowarn",
                "-",
                input_text=edits,
            )
        except GitError as exc:
            raise MergeConflict(f"the edits do not apply to the merged parents: {exc}") from None
    (tree.git_dir / "MERGE_HEAD").write_text(second + "\n")


__all__ = ["SECOND_PARENT_FILE", "MergeConflict", "merge_into", "named_second_parent"]
