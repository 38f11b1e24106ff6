"""Durable file writes: fsync a directory, and replace a file atomically."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


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


def atomic_write(final: Path, data: bytes, *, sync: bool = True) -> None:
    """Write `data` to `final` via a temporary file and os.replace (0644). With `sync` (the
    default) the file and its directory are fsynced; without, the caller syncs them later."""
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=final.parent)
    os.fchmod(fd, 0o644)  # mkstemp creates 0600
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            if sync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, final)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    if sync:
        fsync_dir(final.parent)
