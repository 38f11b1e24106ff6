"""The patch checker: every reason a candidate patch falls outside its mutation boundary.

Every candidate patch is validated *before* it is applied (AIE Bench Sections 2.4, 3.1); a
patch that touches anything outside the boundary is rejected and no candidate is produced for
the trial. The patch is read by `diff_parser`; the boundary's matching rules are in
`boundary`, the rules for one file name in `patch_paths`, the verdict in `patch_verdict`. Absolute names and names that resolve above the repository root are reported as
`outside_boundary` as well as `absolute_path`/`path_traversal`.

Always out of bounds, whatever `allowed_paths` says (decisions, conservative on purpose):

* git metadata: any path component `.git` (the repository, a submodule's `.git` file, hooks,
  config), `.gitmodules` (submodule URLs and paths) and `.gitattributes` (checkout filters,
  eol conversion and diff drivers change how *other* files are materialized), anywhere in the
  tree. Components are compared after case folding, dropping the code points HFS+ ignores and
  trailing dots/spaces and NTFS stream suffixes, and NTFS short names (`GIT~1`) count too.
  `.gitignore` is ordinary content: it is allowed where the allow-list allows it.
* benchmark-owned context: any component `.aie_bench_recursive` (the session writes
  `optimizer_context.md` and `mutation_boundary.json` there).
* symbolic links, in any role: a mode whose type is 120000 on either side (created,
  retargeted, deleted, or a file turned into a link). With `worktree=` the validator also
  rejects a path that goes through, or ends at, a symlink that already exists in the worktree:
  a patch without mode lines can rewrite an existing link's target.
* submodule pointers (gitlinks, mode 160000).

Other rules: `..` components, absolute paths, empty or `.` components, backslashes and
control characters in names are rejected; a rename or copy is checked on both sides (copying
*from* outside the boundary is rejected too: the content comes from an immutable file); a
rename counts as a deletion and a new file, a copy as a new file; binary patches need
`allow_binary`. Traditional (non-git) sections need directory-prefixed names (git apply would
otherwise guess `-p0` for the rest of the patch); since git can create or delete a file from a
traditional section without saying so, such sections count as possible additions/deletions
when `allow_new_files`/`allow_deletions` is off. Apply accepted patches with
`git apply -p1` at the worktree root.

Reason codes (stable; a verdict lists every reason found, not just the first)
-----------------------------------------------------------------------------
empty_patch                   the patch text is empty or only whitespace
malformed                     not a patch git would read the same way: no file sections,
                              corrupt hunks or binary data, unreadable or inconsistent names,
                              stray header lines, a binary change without data
patch_too_large               the patch is larger than `max_patch_bytes` (UTF-8 bytes)
absolute_path                 a name is absolute (`/x`, `C:/x`)
path_traversal                a name has a `..` component
unsafe_path                   empty or `.` components, backslash, control or non-UTF-8 bytes
git_metadata                  touches `.git`, `.gitmodules` or `.gitattributes`
benchmark_owned               touches `.aie_bench_recursive/`
symlink                       a symbolic link is created, changed, deleted or written through
gitlink                       a submodule pointer (mode 160000) is changed
unsupported_mode              a mode other than 100644, 100755, 120000, 160000
outside_boundary              a name (either side of a rename/copy) is outside the allowed paths
mode_change_outside_boundary  a mode change (e.g. +x) on a path outside the allowed paths
binary_patch                  a binary change while `allow_binary` is false
new_file_not_allowed          a file is created (add, copy, rename) while `allow_new_files`
                              is false
deletion_not_allowed          a file is removed (delete, rename) while `allow_deletions` is
                              false
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TextIO

from metaeval.errors import ConfigError
from metaeval.protocols.improve.boundary import MutationBoundary, load_boundary
from metaeval.protocols.improve.diff_parser import parse_patch
from metaeval.protocols.improve.diff_section import FileSection
from metaeval.protocols.improve.patch_paths import check_path
from metaeval.protocols.improve.patch_verdict import (
    FileChange,
    PatchVerdict,
    ReasonCollector,
    format_verdict,
)
from metaeval.records.nofollow import read_capped
from metaeval.safe_text import printable

MAX_PATCH_FILE_BYTES = 64 * 1024 * 1024
"""A patch file larger than this is not read (`check-patch`)."""


def _roles(sec: FileSection) -> list[tuple[str, str]]:
    roles: list[tuple[str, str]] = []
    change = sec.change
    if change in ("rename", "copy"):
        if sec.old_path:
            roles.append((sec.old_path, f"{change} source"))
        if sec.new_path:
            roles.append((sec.new_path, f"{change} destination"))
    elif change == "add" and sec.new_path:
        roles.append((sec.new_path, "new file"))
    elif change == "delete" and sec.old_path:
        roles.append((sec.old_path, "deleted file"))
    elif sec.new_path:
        roles.append((sec.new_path, "modified file"))
    known = {p for p, _r in roles}
    for name in sec.all_names():
        if name and name not in known:
            roles.append((name, "a name in the file section's header lines"))
            known.add(name)
    return roles


def _check_section(
    sec: FileSection, boundary: MutationBoundary, out: ReasonCollector, worktree: Path | None
) -> None:
    display = sec.display
    for problem in sec.problems:
        out.add("malformed", display, problem)
    all_inside = True
    for name, role in _roles(sec):
        all_inside &= check_path(name, role, boundary, out, worktree)

    for label, mode in sec.modes:
        kind = int(mode, 8) & 0o170000
        if kind == 0o120000:
            out.add("symlink", display, f"{label} {mode}: symbolic links may not be touched")
        elif kind == 0o160000:
            out.add("gitlink", display, f"{label} {mode}: submodule pointers are immutable")
        elif mode not in ("100644", "100755"):
            out.add("unsupported_mode", display, f"{label} {mode} is not 100644 or 100755")

    old_mode = sec.old_mode_lines[0] if sec.old_mode_lines else None
    new_mode = sec.new_mode_lines[0] if sec.new_mode_lines else None
    if old_mode and new_mode and old_mode != new_mode and not all_inside:
        becomes_exec = int(new_mode, 8) & 0o111 and not int(old_mode, 8) & 0o111
        what = "makes the file executable" if becomes_exec else "changes the file mode"
        out.add(
            "mode_change_outside_boundary",
            display,
            f"mode {old_mode} -> {new_mode} {what} outside the mutation boundary",
        )

    if sec.binary:
        if not boundary.allow_binary:
            out.add("binary_patch", display, "binary changes are not allowed by the boundary")
        elif not sec.binary_data:
            out.add(
                "malformed",
                display,
                f"line {sec.line_no}: binary change without data (produce it with git diff --binary)",
            )

    if not boundary.allow_new_files:
        if sec.change in ("add", "copy", "rename"):
            out.add("new_file_not_allowed", display, f"a {sec.change} creates a file")
        elif sec.may_add:
            out.add(
                "new_file_not_allowed", display, "a traditional diff from empty may create the file"
            )
    if not boundary.allow_deletions:
        if sec.change in ("delete", "rename"):
            what = "a delete" if sec.change == "delete" else "a rename"
            out.add("deletion_not_allowed", sec.old_path or display, f"{what} removes a file")
        elif sec.may_delete:
            out.add(
                "deletion_not_allowed",
                display,
                "a traditional diff to empty may delete the file",
            )


def _patch_size(patch_text: str) -> int:
    try:
        return len(patch_text.encode("utf-8", "surrogateescape"))
    except UnicodeEncodeError:
        return len(patch_text.encode("utf-8", "surrogatepass"))


def check_patch(
    patch_text: str, boundary: MutationBoundary, *, worktree: Path | None = None
) -> PatchVerdict:
    """Validate a candidate patch against the boundary; list every reason to reject it.

    The check is text-only unless `worktree` (the checkout the patch would be applied to) is
    given; then paths that go through or end at an existing symlink are rejected as well.
    """
    out = ReasonCollector()
    size = _patch_size(patch_text)
    if boundary.max_patch_bytes is not None and size > boundary.max_patch_bytes:
        out.add(
            "patch_too_large",
            None,
            f"the patch is {size} bytes, the boundary allows {boundary.max_patch_bytes}",
        )
    if not patch_text.strip():
        out.add("empty_patch", None, "the patch is empty")
        return PatchVerdict(accepted=False, reasons=out.reasons)

    parsed = parse_patch(patch_text)
    for problem in parsed.problems:
        out.add("malformed", None, problem)
    if not parsed.sections:
        out.add("malformed", None, "no file sections found: not a unified or git diff")

    files: list[FileChange] = []
    for sec in parsed.sections:
        _check_section(sec, boundary, out, worktree)
        path = sec.new_path or sec.old_path
        if path:
            old_mode = sec.old_mode_lines[0] if sec.old_mode_lines else None
            new_mode = sec.new_mode_lines[0] if sec.new_mode_lines else None
            if sec.index_mode is not None:
                old_mode = old_mode or (None if sec.is_new else sec.index_mode)
                new_mode = new_mode or (None if sec.is_delete else sec.index_mode)
            files.append(
                FileChange(
                    path=path,
                    old_path=sec.old_path if sec.change in ("rename", "copy") else None,
                    change=sec.change,
                    old_mode=old_mode,
                    new_mode=new_mode,
                    binary=sec.binary,
                )
            )
    return PatchVerdict(accepted=not out.reasons, reasons=out.reasons, files=files)


# --------------------------------------------------------------------------------------------
# CLI helper
# --------------------------------------------------------------------------------------------


def check_patch_cli(
    boundary_path: Path,
    patch_path: Path,
    *,
    worktree: Path | None = None,
    out: TextIO | None = None,
) -> int:
    """`metaeval improve check-patch --boundary BOUNDARY.json PATCH`: 0 accepted, 1 rejected."""
    boundary = load_boundary(boundary_path)
    # a regular file only (a FIFO or /dev/zero is refused at once), capped
    raw = read_capped(Path(patch_path), MAX_PATCH_FILE_BYTES, follow_link=True)
    if raw is None:
        raise ConfigError("patch file not found", file=str(patch_path))
    verdict = check_patch(raw.decode("utf-8", "surrogateescape"), boundary, worktree=worktree)
    # the reasons quote the patch's file names: no escape sequence of theirs reaches a terminal
    print(printable(format_verdict(verdict)), file=out or sys.stdout)
    return 0 if verdict.accepted else 1
