"""What a task phase may write, and how the cap is enforced (task.toml `storage_mb`).

Each writable place of a phase gets the cap on its own:

- `/tmp` is a tmpfs of `tmp_size_mb(storage_mb)` (at most `TMPFS_MAX_MB`: it is memory, and
  counts outside RLIMIT_AS), `/dev/shm` one of `policy.SHM_MB`: the kernel refuses writes past
  them. A phase that ends with either full failed: a wrapper inside the sandbox checks them
  after the command (`with_tmpfs_check`) and exits with `TMP_FULL` / `SHM_FULL`;
- the host directories bound writable (`/app`, `/logs/verifier`): no file may grow past the
  cap (RLIMIT_FSIZE; the writer gets SIGXFSZ), and the harness measures each directory about
  every second while the phase runs and once after it (`tree_watch`); past the cap, or past
  `MAX_ENTRIES` files, the phase is killed. A fast writer can overshoot by what it writes
  between two measurements, never by more than one file of the cap.

The phase then fails with `ExecResult.limit_exceeded`, e.g. "wrote more than 2048 MiB to /tmp".
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from metaeval.sandbox.policy import SHM_MB

TMPFS_MAX_MB = 4096
"""The largest /tmp a phase gets, whatever storage_mb says (a tmpfs is memory)."""
MAX_ENTRIES = 1_000_000
"""More files and directories than this in one writable directory fail the phase."""
TMP_FULL = 218
SHM_FULL = 219
"""Exit codes of the in-sandbox check for a full /tmp or /dev/shm."""

# Runs the command, then fails the phase when /tmp or /dev/shm ended full (no free block).
_CHECK = (
    '"$@"; rc=$?; '
    "for spec in /tmp:218 /dev/shm:219; do "
    'set -- $(stat -f -c "%f %b" "${spec%:*}" 2>/dev/null); '
    'if [ "$1" = 0 ] && [ -n "$2" ] && [ "$2" != 0 ]; then exit "${spec#*:}"; fi; '
    "done; exit $rc"
)


def tmp_size_mb(storage_mb: int) -> int:
    """The size of a phase's /tmp for a storage cap of `storage_mb`."""
    return max(1, min(int(storage_mb), TMPFS_MAX_MB))


def with_tmpfs_check(command: Sequence[str]) -> list[str]:
    """`command` run by a /bin/sh that afterwards checks /tmp and /dev/shm (exit codes
    TMP_FULL, SHM_FULL; else the command's own)."""
    return ["/bin/sh", "-c", _CHECK, "metaeval-storage", *command]


def tmpfs_reason(returncode: int | None, tmp_mb: int) -> str | None:
    """What a wrapper's exit code says was exceeded (None: nothing)."""
    if returncode == TMP_FULL:
        return f"wrote more than {tmp_mb} MiB to /tmp (it is full)"
    if returncode == SHM_FULL:
        return f"wrote more than {SHM_MB} MiB to /dev/shm (it is full)"
    return None


def tree_usage(root: Path, max_entries: int = MAX_ENTRIES) -> tuple[int, int, int]:
    """(bytes, entries, largest file) under `root`, links not followed; stops counting at
    `max_entries` + 1 entries. A file counts its larger of size and allocated blocks."""
    total = entries = largest = 0
    pending = [os.fspath(root)]
    while pending and entries <= max_entries:
        try:
            with os.scandir(pending.pop()) as scan:
                for entry in scan:
                    entries += 1
                    try:
                        info = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    size = max(info.st_size, info.st_blocks * 512)
                    total += size
                    if stat.S_ISDIR(info.st_mode):
                        pending.append(entry.path)
                    elif stat.S_ISREG(info.st_mode):
                        largest = max(largest, info.st_size)
        except OSError:
            continue
    return total, entries, largest


def tree_watch(dirs: Mapping[Path, str], limit_mb: int) -> Callable[[], str | None]:
    """A `run_process` watch: the reason a directory (host path -> its name inside) holds
    more than `limit_mb` MiB, a file of that size, or more than MAX_ENTRIES entries."""
    limit = int(limit_mb) * 1024 * 1024

    def watch() -> str | None:
        for host, inside in dirs.items():
            total, entries, largest = tree_usage(host)
            if total > limit or largest >= limit:
                return f"wrote more than {limit_mb} MiB to {inside}"
            if entries > MAX_ENTRIES:
                return f"created more than {MAX_ENTRIES} files in {inside}"
        return None

    return watch
