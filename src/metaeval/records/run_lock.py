"""The lock of a run directory: one process at a time may have a run open."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from metaeval.errors import MetaevalError
from metaeval.records.nofollow import open_file


def acquire_lock(path: Path, lock_name: str) -> int:
    """An exclusive, non-blocking flock on run directory `path`'s lock file, holding our pid;
    MetaevalError naming the holder when another process has it."""
    # never through a link: a shared run's .lock may point at a file of the user's, which the
    # truncation below would empty
    fd = open_file(path / lock_name, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        try:
            holder = os.pread(fd, 64, 0).decode("ascii", "replace").strip() or "unknown"
        finally:
            os.close(fd)
        raise MetaevalError(
            f"run directory {path} is in use by another process (pid {holder}); "
            "wait for it to finish or use another run directory"
        ) from None
    except BaseException:
        os.close(fd)
        raise
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def release_lock(fd: int) -> None:
    """Release and close a lock taken with `acquire_lock`."""
    try:
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
