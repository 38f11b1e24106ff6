"""Reading, walking and removing files of an untrusted directory without leaving it.

A benchmark task or a task pack is input metaeval does not trust. Nothing in it may lead
metaeval to read, copy, bind or run a file outside it: a symlink whose target leaves the
directory is never followed, and FIFOs, sockets and device files are never opened (opening
a FIFO blocks, reading a device never ends). This module is the one place those rules live:

- `walk_tree` lists a directory tree iteratively (no recursion limit for deep nesting), one
  `TreeEntry` per entry, classifying symlinks by where they lead;
- `open_regular` / `read_regular` / `read_head` open one file only when it is a regular file
  whose real path stays inside a boundary directory, with a size cap;
- `irregular_entries` lists what a tree holds besides plain files and directories (for trees
  metaeval wrote itself, such as releases and bundles, where any of it means tampering);
- `sha256_fd` hashes an open file in chunks (constant memory, whatever its size);
- `remove_tree` deletes a tree however deep, without following symlinks.

Copying a tree by these rules is `tree_copy.copy_tree`.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

EntryKind = Literal[
    "file", "dir", "link", "link_dir", "outside_link", "dangling_link", "special", "error"
]
"""What a tree entry is:

- file: a regular file; dir: a directory (walked);
- link: a symlink to a regular file inside the boundary (content may be read);
- link_dir: a symlink to a directory inside the boundary (not followed);
- outside_link: a symlink whose target resolves outside the boundary (never followed);
- dangling_link: a symlink to nothing, or to something that is not a file or directory;
- special: a FIFO, socket or device file (never opened);
- error: an entry that could not be examined (too long a path, permission).
"""

LINK_TEXT_CHARS = 120


class UnsafeFileError(OSError):
    """A file that must not be read: outside the boundary, not regular, or too large."""


@dataclass(frozen=True)
class TreeEntry:
    """One entry of a walked tree; `rel` is relative to the walked directory (posix)."""

    rel: str
    path: Path
    kind: EntryKind
    detail: str = ""  # special: "FIFO"; links: the link text (shortened); error: the reason

    def describe(self) -> str:
        """A short human-readable reason for an entry that is not a plain file or directory."""
        if self.kind == "outside_link":
            return f"symlink leading outside ({self.detail})"
        if self.kind == "dangling_link":
            return f"dangling symlink ({self.detail})"
        if self.kind == "link_dir":
            return f"symlinked directory not followed ({self.detail})"
        if self.kind == "link":
            return f"symlink ({self.detail})"
        if self.kind == "special":
            return f"not a regular file ({self.detail}), not opened"
        if self.kind == "error":
            return f"unreadable ({self.detail})"
        return self.kind


def is_inside(boundary: Path | str, path: Path | str) -> bool:
    """True when the real path of `path` is `boundary` itself or below it (links resolved)."""
    base = os.path.realpath(boundary)
    real = os.path.realpath(path)
    return real == base or real.startswith(base.rstrip(os.sep) + os.sep)


def special_kind(mode: int) -> str | None:
    """The name of a special file type (FIFO, socket, device), None for files and dirs."""
    if stat.S_ISFIFO(mode):
        return "FIFO"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode):
        return "character device"
    if stat.S_ISBLK(mode):
        return "block device"
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode):
        return None
    return "unknown file type"


def link_text(path: Path | str) -> str:
    """The (shortened) target text of a symlink, for notes; '?' when it cannot be read."""
    try:
        text = os.readlink(path)
    except OSError:
        return "?"
    return text if len(text) <= LINK_TEXT_CHARS else text[: LINK_TEXT_CHARS - 3] + "..."


def classify(path: Path | str, boundary: Path | str) -> tuple[EntryKind, str]:
    """(kind, detail) of one path, without following a symlink out of `boundary`."""
    try:
        info = os.lstat(path)
    except OSError as exc:
        return "error", exc.strerror or type(exc).__name__
    if stat.S_ISLNK(info.st_mode):
        text = link_text(path)
        if not is_inside(boundary, path):
            return "outside_link", text
        try:
            target = os.stat(path)
        except OSError:
            return "dangling_link", text
        if stat.S_ISREG(target.st_mode):
            return "link", text
        if stat.S_ISDIR(target.st_mode):
            return "link_dir", text
        return "dangling_link", text
    if stat.S_ISDIR(info.st_mode):
        return "dir", ""
    if stat.S_ISREG(info.st_mode):
        return "file", ""
    return "special", special_kind(info.st_mode) or "unknown file type"


def walk_tree(
    directory: Path | str,
    *,
    boundary: Path | str | None = None,
    ignore_dirs: Iterable[str] = (),
) -> list[TreeEntry]:
    """Every entry below `directory`, sorted by relative path; directories are not followed
    through symlinks. `boundary` (default: `directory`) decides which links lead outside.
    Works iteratively, so a deeply nested tree cannot exhaust the recursion limit.
    """
    root = Path(directory)
    bound = Path(boundary) if boundary is not None else root
    ignored = frozenset(ignore_dirs)
    found: list[TreeEntry] = []
    stack: list[tuple[Path, str]] = [(root, "")]
    while stack:
        current, prefix = stack.pop()
        try:
            with os.scandir(current) as listing:
                entries = sorted(listing, key=_entry_name)
        except OSError as exc:
            if prefix:
                found.append(TreeEntry(prefix.rstrip("/"), current, "error", exc.strerror or ""))
            continue
        for entry in entries:
            name = entry.name
            path = current / name
            rel = prefix + name
            kind, detail = _entry_kind(entry, path, bound)
            if kind == "dir":
                if name in ignored:
                    continue
                found.append(TreeEntry(rel, path, "dir"))
                stack.append((path, rel + "/"))
                continue
            found.append(TreeEntry(rel, path, kind, detail))
    found.sort(key=lambda entry: entry.rel)
    return found


def _entry_name(entry: os.DirEntry[str]) -> str:
    return entry.name


def _entry_kind(entry: os.DirEntry[str], path: Path, boundary: Path) -> tuple[EntryKind, str]:
    """`classify` for a listed entry: plain files and directories are told apart by the
    type the listing carries (no system call); links and anything else get a full look."""
    try:
        if not entry.is_symlink():
            if entry.is_dir(follow_symlinks=False):
                return "dir", ""
            if entry.is_file(follow_symlinks=False):
                return "file", ""
    except OSError:
        pass
    return classify(path, boundary)


def open_regular(
    path: Path | str, boundary: Path | str, *, follow_inside_links: bool = True
) -> int:
    """A read-only descriptor of `path`, only when it is a regular file inside `boundary`.

    A symlink is refused unless `follow_inside_links` and its real path stays inside the
    boundary; the file is opened non-blocking (a FIFO cannot hang the open) and checked
    with fstat. Raises UnsafeFileError saying why, never with the file's content.
    """
    path = Path(path)
    if os.path.islink(path):
        if not follow_inside_links:
            raise UnsafeFileError(f"{path.name} is a symlink, not read")
        if not is_inside(boundary, path):
            raise UnsafeFileError(f"{path.name} is a symlink leading outside, not read")
        path = Path(os.path.realpath(path))
    elif not is_inside(boundary, path.parent):
        raise UnsafeFileError(f"{path.name} is not inside {boundary}, not read")
    try:
        return open_checked(path, follow_links=False)
    except UnsafeFileError:
        raise
    except OSError as exc:
        raise UnsafeFileError(f"{path.name}: cannot open ({exc.strerror})") from exc


def open_checked(path: Path | str, *, follow_links: bool = True) -> int:
    """A read-only descriptor of a path already classified as a file (or an inside link), by
    the one read rule (`records.nofollow.open_regular_fd`): refused unless fstat says it is
    still a regular file. With `follow_links=False` a symlink in its place is refused."""
    # imported here: metaeval.records imports this module (through tasks.safe_json)
    from metaeval.records.nofollow import NotRegularFile, open_regular_fd

    try:
        return open_regular_fd(path, follow_link=follow_links)
    except NotRegularFile as exc:
        kind = special_kind(exc.mode) or "directory"
        raise UnsafeFileError(f"{Path(path).name} is not a regular file ({kind})") from None


def read_regular(
    path: Path | str,
    boundary: Path | str,
    *,
    max_bytes: int,
    follow_inside_links: bool = True,
) -> bytes:
    """The bytes of a regular file inside `boundary`; UnsafeFileError when it is anything
    else or longer than `max_bytes`."""
    data, longer = read_head(
        path, boundary, max_bytes=max_bytes, follow_inside_links=follow_inside_links
    )
    if longer:
        raise UnsafeFileError(f"{Path(path).name} is larger than {max_bytes} bytes, not read")
    return data


def read_head(
    path: Path | str,
    boundary: Path | str,
    *,
    max_bytes: int,
    follow_inside_links: bool = True,
) -> tuple[bytes, bool]:
    """(the first `max_bytes` bytes, whether the file holds more) of a regular file inside
    `boundary`; UnsafeFileError when it is anything else."""
    fd = open_regular(path, boundary, follow_inside_links=follow_inside_links)
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(max_bytes + 1)
    return data[:max_bytes], len(data) > max_bytes


HASH_CHUNK_BYTES = 1 << 20


def sha256_fd(fd: int) -> str:
    """Hex SHA-256 of the rest of an open file, read in 1 MiB chunks: memory stays constant
    however large (or sparse) the file is. The descriptor is left open."""
    digest = hashlib.sha256()
    while chunk := os.read(fd, HASH_CHUNK_BYTES):
        digest.update(chunk)
    return digest.hexdigest()


def irregular_entries(directory: Path | str, *, recursive: bool = True) -> list[TreeEntry]:
    """Every entry below `directory` that is not a plain file or directory: symlinks (inside
    or leading out), FIFOs, sockets, devices and unreadable entries, sorted by path. With
    `recursive=False` only the top level is looked at. Nothing is opened or followed."""
    if recursive:
        entries = walk_tree(directory)
    else:
        entries = []
        with os.scandir(directory) as listing:
            for item in sorted(listing, key=_entry_name):
                kind, detail = _entry_kind(item, Path(item.path), Path(directory))
                entries.append(TreeEntry(item.name, Path(item.path), kind, detail))
    return [entry for entry in entries if entry.kind not in ("file", "dir")]


def remove_tree(path: Path | str) -> list[str]:
    """Delete `path` and everything below it, iteratively and without following symlinks.

    shutil.rmtree recurses once per directory level, so a tree nested deeper than the
    recursion limit (which a task, or the code a sandbox runs, can create) makes it raise
    RecursionError and leave the tree behind. Returns the problems met (empty when all was
    removed); never raises for entries it cannot remove.
    """
    problems: list[str] = []
    top = os.fspath(path)
    if not os.path.lexists(top):
        return problems
    if os.path.islink(top) or not os.path.isdir(top):
        _unlink(top, problems)
        return problems
    stack: list[tuple[str, bool]] = [(top, False)]
    while stack:
        current, emptied = stack.pop()
        if emptied:
            try:
                os.rmdir(current)
            except OSError as exc:
                problems.append(f"{current}: {exc.strerror}")
            continue
        stack.append((current, True))
        with contextlib.suppress(OSError):  # a directory made read-only inside the sandbox
            os.chmod(current, 0o700)
        try:
            entries = list(os.scandir(current))
        except OSError as exc:
            problems.append(f"{current}: {exc.strerror}")
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                stack.append((entry.path, False))
            else:
                _unlink(entry.path, problems)
    return problems


def _unlink(path: str, problems: list[str]) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        problems.append(f"{path}: {exc.strerror}")
