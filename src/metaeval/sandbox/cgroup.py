"""A memory cap by cgroup for one process tree (for runtimes that RLIMIT_AS breaks).

RLIMIT_AS bounds virtual address space, which JIT and WebAssembly runtimes (node, bun) reserve
in far larger amounts than they use: Claude Code and Gemini CLI die under it. A memory cgroup
bounds what a process tree really holds (resident memory and page cache) and, when the tree
goes over, the kernel's OOM killer ends a process inside it and counts an ``oom_kill`` event.

`MemoryCgroup.create` makes a child of this process's own memory cgroup (so an outer limit
still applies) named ``metaeval-<pid>-<n>``:

- cgroup v1 (``/sys/fs/cgroup/memory``): ``memory.limit_in_bytes``, and
  ``memory.memsw.limit_in_bytes`` set to the same value where swap accounting exists (no
  escape into swap); the OOM count is ``oom_kill`` in ``memory.oom_control``.
- cgroup v2 (the unified hierarchy, when its ``cgroup.controllers`` lists ``memory``):
  ``memory.max`` and ``memory.swap.max = 0``; the OOM count is ``oom_kill`` in
  ``memory.events``. The parent must have ``memory`` in ``cgroup.subtree_control`` (it is
  enabled when the kernel allows it).

When neither can be written (no root, a read-only cgroupfs, a v2 parent holding processes),
`create` returns None with the reason from `unavailable_reason`, and callers run bounded by
time only and record that. The child joins the cgroup between fork and exec (`join_hook`).
`close` kills whatever is still inside and removes the directory; groups left behind by a
metaeval process that was killed are swept the next time one is created.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
NAME_PREFIX = "metaeval-"
_NAME_RE = re.compile(rf"^{NAME_PREFIX}(\d+)-\d+$")
_counter = itertools.count(1)
_swept: set[Path] = set()
_sweep_lock = threading.Lock()


class MemoryCgroup:
    """One memory cgroup holding one process tree; see the module docstring."""

    def __init__(self, path: Path, version: int, limit_mb: int):
        self.path = path
        self.version = version
        self.limit_mb = limit_mb
        self._procs_fd: int | None = None

    @classmethod
    def create(cls, limit_mb: int, root: Path = CGROUP_ROOT) -> MemoryCgroup:
        """A fresh cgroup capped at `limit_mb` MiB; raises OSError when none can be made."""
        parent, version = memory_parent(root)
        with _sweep_lock:
            first = parent not in _swept
            _swept.add(parent)
        if first:
            sweep_stale(parent)
        path = parent / f"{NAME_PREFIX}{os.getpid()}-{next(_counter)}"
        if version == 2:
            _enable_v2_memory(parent)
        path.mkdir()
        group = cls(path, version, limit_mb)
        try:
            limit = str(int(limit_mb) * 1024 * 1024)
            if version == 1:
                _write(path / "memory.limit_in_bytes", limit)
                if (path / "memory.memsw.limit_in_bytes").exists():
                    _write(path / "memory.memsw.limit_in_bytes", limit)
            else:
                _write(path / "memory.max", limit)
                if (path / "memory.swap.max").exists():
                    _write(path / "memory.swap.max", "0")
            group._procs_fd = os.open(path / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC)
        except OSError:
            group.close()
            raise
        return group

    def join_hook(self) -> Callable[[], None]:
        """A preexec_fn moving the child into this cgroup (the fd was opened in the parent,
        so the child only writes: no allocation between fork and exec)."""
        fd = self._procs_fd
        if fd is None:
            raise ValueError(f"cgroup {self.path} is closed")

        def join() -> None:
            os.write(fd, b"0")

        return join

    def oom_kills(self) -> int:
        """How many processes the OOM killer ended in this cgroup (0 when unknown)."""
        name = "memory.oom_control" if self.version == 1 else "memory.events"
        try:
            text = (self.path / name).read_text()
        except OSError:
            return 0
        match = re.search(r"^oom_kill (\d+)$", text, re.MULTILINE)
        return int(match.group(1)) if match else 0

    def limit_hits(self) -> int:
        """How often the tree's usage reached the cap (v1 ``memory.failcnt``, v2 ``max`` in
        ``memory.events``): a tree slowed down by reclaim near its cap shows here even when
        nothing was killed. 0 when unknown."""
        try:
            if self.version == 1:
                return int((self.path / "memory.failcnt").read_text().strip())
            text = (self.path / "memory.events").read_text()
        except (OSError, ValueError):
            return 0
        match = re.search(r"^max (\d+)$", text, re.MULTILINE)
        return int(match.group(1)) if match else 0

    def peak_bytes(self) -> int | None:
        """The most memory the tree held (None where the kernel does not say)."""
        name = "memory.max_usage_in_bytes" if self.version == 1 else "memory.peak"
        try:
            return int((self.path / name).read_text().strip())
        except (OSError, ValueError):
            return None

    def close(self) -> None:
        """Kill what is left inside, then remove the cgroup (idempotent)."""
        if self._procs_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._procs_fd)
            self._procs_fd = None
        remove_group(self.path)


def remove_group(path: Path, wait_s: float = 5.0) -> bool:
    """SIGKILL every process in the cgroup at `path` and remove it; True when it is gone."""
    deadline = time.monotonic() + wait_s
    pause = 0.002
    while path.exists():
        for pid in _procs(path):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        try:
            path.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(pause)  # the processes are still leaving the cgroup
            pause = min(pause * 2, 0.05)
    return True


def memory_parent(root: Path = CGROUP_ROOT) -> tuple[Path, int]:
    """(this process's memory cgroup directory, cgroup version); raises OSError when there is
    no writable memory cgroup hierarchy."""
    lines = Path("/proc/self/cgroup").read_text().splitlines()
    v1 = root / "memory"
    for line in lines:
        _, controllers, rel = line.split(":", 2)
        if "memory" in controllers.split(",") and (v1 / "memory.limit_in_bytes").exists():
            return _writable(v1 / rel.lstrip("/")), 1
    unified = next((line.split(":", 2)[2] for line in lines if line.startswith("0::")), None)
    if unified is not None:
        for mount in (root, root / "unified"):
            listing = mount / "cgroup.controllers"
            if listing.exists() and "memory" in listing.read_text().split():
                return _writable(mount / unified.lstrip("/")), 2
    raise OSError("no memory cgroup controller (neither v1 nor v2 with memory) is mounted")


def unavailable_reason(root: Path = CGROUP_ROOT) -> str | None:
    """Why no memory cgroup can be made here, or None when one can."""
    try:
        group = MemoryCgroup.create(64, root)
    except OSError as exc:
        return str(exc) or type(exc).__name__
    group.close()
    return None


def _writable(path: Path) -> Path:
    if not path.is_dir():
        raise OSError(f"memory cgroup {path} does not exist")
    if not os.access(path, os.W_OK):
        raise OSError(f"memory cgroup {path} is not writable (needs root or a delegated cgroup)")
    return path


def _enable_v2_memory(parent: Path) -> None:
    control = parent / "cgroup.subtree_control"
    if "memory" in control.read_text().split():
        return
    try:
        _write(control, "+memory")
    except OSError as exc:
        raise OSError(
            f"cannot enable the memory controller below {parent} ({exc.strerror}; a cgroup v2 "
            "parent that holds processes cannot delegate it)"
        ) from exc


def _write(path: Path, value: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def _procs(path: Path) -> list[int]:
    try:
        return [int(p) for p in (path / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def sweep_stale(parent: Path) -> list[Path]:
    """Remove the cgroups under `parent` left by metaeval processes that no longer exist
    (killing what they still hold); returns the ones removed."""
    removed = []
    with contextlib.suppress(OSError):
        for entry in parent.iterdir():
            match = _NAME_RE.match(entry.name)
            stale = match and entry.is_dir() and not _alive(int(match.group(1)))
            if stale and remove_group(entry, wait_s=1.0):
                removed.append(entry)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
