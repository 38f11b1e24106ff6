"""Copying an untrusted tree by the rules of `safe_files`.

`copy_tree` copies the regular files of a tree (a symlink to a regular file inside the
boundary becomes a copy of that file; nothing else that is not a plain file or directory is
copied) and returns a note for everything it left out.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Callable
from pathlib import Path

from metaeval.tasks.safe_files import TreeEntry, classify, open_regular, walk_tree


def copy_tree(
    src: Path | str,
    dst: Path | str,
    *,
    boundary: Path | str,
    skip: Callable[[str], bool] | None = None,
    label: str = "",
) -> list[str]:
    """Copy the files of `src` to a new directory `dst`; returns notes on what was left out.

    Regular files and directories are copied (modes kept); a symlink to a regular file
    inside `boundary` is copied as that file. Symlinks leading outside `boundary`,
    symlinked directories, dangling links and special files are left out, each with a note
    `<label><rel>: <reason>`. `skip(rel)` drops entries (and whole directories) silently.
    When `src` itself is a symlink leading outside the boundary or not a directory,
    `dst` is created empty and the note says why.
    """
    src, dst = Path(src), Path(dst)
    notes: list[str] = []
    dst.mkdir(parents=True, exist_ok=True)
    kind, detail = classify(src, boundary)
    if kind == "link_dir":
        src = Path(os.path.realpath(src))
    elif kind != "dir":
        reason = (
            TreeEntry("", src, kind, detail).describe() if kind != "file" else "not a directory"
        )
        notes.append(f"{label.rstrip('/') or src.name}: {reason}")
        return notes
    skipped_dirs: list[str] = []
    for entry in walk_tree(src, boundary=boundary):
        if any(entry.rel.startswith(d + "/") for d in skipped_dirs):
            continue
        if skip is not None and skip(entry.rel):
            if entry.kind == "dir":
                skipped_dirs.append(entry.rel)
            continue
        target = dst / entry.rel
        try:
            if entry.kind == "dir":
                target.mkdir(exist_ok=True)
            elif entry.kind in ("file", "link"):
                _copy_file(entry.path, target, boundary)
            else:
                notes.append(f"{label}{entry.rel}: {entry.describe()}")
        except OSError as exc:
            notes.append(f"{label}{entry.rel}: not copied ({exc.strerror or exc})")
    return notes


def _copy_file(path: Path, target: Path, boundary: Path | str) -> None:
    fd = open_regular(path, boundary)
    with os.fdopen(fd, "rb") as source, open(target, "wb") as sink:
        shutil.copyfileobj(source, sink, 1 << 20)
        mode = os.fstat(source.fileno()).st_mode
    os.chmod(target, stat.S_IMODE(mode) | stat.S_IRUSR | stat.S_IWUSR)
