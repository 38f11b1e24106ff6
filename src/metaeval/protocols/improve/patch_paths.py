"""The patch checker's rules for one file name: its shape, where it resolves, whether it
touches git metadata or benchmark-owned files, whether it is inside the mutation boundary,
and (given the worktree) whether it goes through an existing symbolic link.
"""

from __future__ import annotations

import re
from pathlib import Path

from metaeval.protocols.improve.boundary import BENCHMARK_DIR, MutationBoundary
from metaeval.protocols.improve.patch_verdict import ReasonCollector

_IGNORABLE = re.compile("[\u200c-\u200f\u202a-\u202e\u206a-\u206f\ufeff]")
_GIT_NAMES = {
    ".git": "the repository's git metadata",
    ".gitmodules": "submodule configuration",
    ".gitattributes": "git attributes (checkout filters, eol, diff drivers)",
}
_SHORT_NAMES = re.compile(r"^(git|gitmod|gitatt)~\d+$")


def _fold(component: str) -> str:
    """How case-insensitive / HFS+ / NTFS file systems may read a component."""
    c = _IGNORABLE.sub("", component).casefold()
    c = c.split(":", 1)[0]
    return c.rstrip(" .")


def check_path(
    path: str,
    role: str,
    boundary: MutationBoundary,
    out: ReasonCollector,
    worktree: Path | None,
) -> bool:
    """Check one name; return True if it is inside the boundary."""
    comps = path.split("/")
    absolute, unsafe = _check_shape(path, role, comps, out)
    stack, escaped = _resolve(comps)
    if ".." in comps:
        where = "resolves outside the repository root" if escaped else "stays inside the repo"
        out.add("path_traversal", path, f"{role} has a '..' component ({where})")
    _check_protected(path, role, [*comps, *stack], out)
    inside = not absolute and not escaped and boundary.allows("/".join(stack))
    if not inside:
        out.add(
            "outside_boundary",
            path,
            f"{role} is outside the mutation boundary (root '{boundary.mutable_root}', "
            f"allowed: {', '.join(boundary.allowed_paths) or 'none'})",
        )
    elif worktree is not None and not unsafe:
        _check_existing_symlink(path, role, stack, Path(worktree), out)
    return inside


def _check_shape(path: str, role: str, comps: list[str], out: ReasonCollector) -> tuple[bool, bool]:
    """Absolute names, empty or `.` components, backslashes, control characters:
    (absolute, unsafe characters)."""
    absolute = path.startswith("/") or bool(re.match(r"^[A-Za-z]:", path))
    if absolute:
        out.add("absolute_path", path, f"{role} is an absolute path")
    inner = comps[1:] if path.startswith("/") else comps
    if any(c in ("", ".") for c in inner):
        out.add("unsafe_path", path, f"{role} has an empty or '.' component")
    if "\\" in path:
        out.add("unsafe_path", path, f"{role} contains a backslash")
    unsafe = any(ord(ch) < 0x20 or ord(ch) == 0x7F or 0xD800 <= ord(ch) <= 0xDFFF for ch in path)
    if unsafe:
        out.add("unsafe_path", path, f"{role} contains control characters or non-UTF-8 bytes")
    return absolute, unsafe


def _resolve(comps: list[str]) -> tuple[list[str], bool]:
    """The components left once `.` and `..` are resolved, and whether a `..` left the root."""
    stack: list[str] = []
    escaped = False
    for c in comps:
        if c in ("", "."):
            continue
        if c == "..":
            if stack:
                stack.pop()
            else:
                escaped = True
        else:
            stack.append(c)
    return stack, escaped


def _check_protected(path: str, role: str, comps: list[str], out: ReasonCollector) -> None:
    """Git metadata and benchmark-owned components, however a file system may spell them."""
    for c in dict.fromkeys(comps):
        folded = _fold(c)
        if folded in _GIT_NAMES or _SHORT_NAMES.match(folded):
            what = _GIT_NAMES.get(folded, "git metadata (NTFS short name)")
            out.add("git_metadata", path, f"{role} touches {what}: immutable")
        elif folded == BENCHMARK_DIR:
            out.add("benchmark_owned", path, f"{role} touches benchmark-owned {BENCHMARK_DIR}/")


def _check_existing_symlink(
    path: str, role: str, stack: list[str], worktree: Path, out: ReasonCollector
) -> None:
    """A name that goes through, or ends at, a symbolic link already in the worktree."""
    here = worktree
    for c in stack:
        here = here / c
        if here.is_symlink():
            out.add(
                "symlink",
                path,
                f"{role} goes through or is an existing symbolic link "
                f"'{here.relative_to(worktree)}' in the worktree",
            )
            break
        if not here.exists():
            break
