"""Durable file writes: fsync a directory, and replace a file atomically."""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path

from metaeval.errors import with_filename
from metaeval.records.nofollow import open_dir, open_in_dir, refused


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """fsync a directory so a new entry in it survives a crash (best effort)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(
    final: Path, data: bytes, *, sync: bool = True, root: Path | None = None, mkdir: bool = False
) -> None:
    """Write `data` to `final` via a temporary file and os.replace (0644). With `sync` (the
    default) the file and its directory are fsynced; without, the caller syncs them later.

    Never through a link (see `metaeval.records.nofollow`): the directories from `root`
    (default: `final`'s own directory, trusted) down to `final` are walked without following
    links, made when missing with `mkdir` (`root` too, as any path), and a link at `final` is
    refused, not replaced."""
    final = Path(final)
    root = final.parent if root is None else Path(root)
    try:
        _atomic_write(final, data, sync, root, mkdir)
    except OSError as exc:  # a full disk or a read-only output: the error names the file
        raise with_filename(exc, final) from exc


def _atomic_write(final: Path, data: bytes, sync: bool, root: Path, mkdir: bool) -> None:
    if mkdir:
        root.mkdir(parents=True, exist_ok=True)  # the directory the caller named, trusted
    dir_fd = open_dir(final.parent, root, create=mkdir)
    try:
        with contextlib.suppress(FileNotFoundError):
            mode = os.lstat(final.name, dir_fd=dir_fd).st_mode
            if not stat.S_ISREG(mode):
                raise refused(final)
        tmp = f".tmp-{secrets.token_hex(8)}"
        fd = open_in_dir(dir_fd, tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, final.parent / tmp)
        try:
            os.fchmod(fd, 0o644)  # whatever the umask, as before
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                if sync:
                    f.flush()
                    os.fsync(f.fileno())
            os.replace(tmp, final.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dir_fd)
            raise
        if sync:
            with contextlib.suppress(OSError):
                os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
