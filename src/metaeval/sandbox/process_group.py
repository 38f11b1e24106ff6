"""A child process in its own process group: limits applied between fork and exec (address
space, file size, CPU affinity, a memory cgroup), dying with its parent, and stopping the
whole group (see `metaeval.sandbox.process` for running one command to its end)."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from metaeval.sandbox.cgroup import MemoryCgroup

PR_SET_PDEATHSIG = 1  # linux/prctl.h


def kill_process_group(pgid: int) -> None:
    """SIGKILL every process in group `pgid`; a group that is already gone is fine."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def memory_limiter(memory_mb: int | None) -> Callable[[], None] | None:
    """A preexec_fn setting RLIMIT_AS (bound in advance: no imports or locks in the child)."""
    if memory_mb is None:
        return None
    limit = int(memory_mb) * 1024 * 1024
    return functools.partial(resource.setrlimit, resource.RLIMIT_AS, (limit, limit))


def file_size_limiter(file_size_mb: int | None) -> Callable[[], None] | None:
    """A preexec_fn setting RLIMIT_FSIZE: no file written grows past it (SIGXFSZ)."""
    if file_size_mb is None:
        return None
    limit = int(file_size_mb) * 1024 * 1024
    return functools.partial(resource.setrlimit, resource.RLIMIT_FSIZE, (limit, limit))


def chain_hooks(*hooks: Callable[[], None] | None) -> Callable[[], None] | None:
    """One preexec_fn running the given ones in order (None when there are none)."""
    present = [hook for hook in hooks if hook is not None]
    if not present:
        return None
    if len(present) == 1:
        return present[0]

    def run_all() -> None:
        for hook in present:
            hook()

    return run_all


def open_cgroup(memory_cgroup_mb: int | None) -> tuple[MemoryCgroup | None, str | None]:
    """(cgroup, note) for a run asking for a cgroup memory cap; the note says how memory was
    bounded, or why it was bounded by time only."""
    if memory_cgroup_mb is None:
        return None, None
    try:
        group = MemoryCgroup.create(memory_cgroup_mb)
    except OSError as exc:
        why = str(exc) or type(exc).__name__
        return None, f"no memory cgroup ({why}); bounded by time only"
    return group, f"cgroup v{group.version} memory cap {memory_cgroup_mb} MiB"


def limiter(memory_mb: int | None, cpus: int | None) -> Callable[[], None] | None:
    """A preexec_fn applying RLIMIT_AS and, with `cpus`, an affinity to the first `cpus` of
    the CPUs this process may use (both bound in advance, nothing computed in the child)."""
    memory = memory_limiter(memory_mb)
    if cpus is None:
        return memory
    allowed = sorted(os.sched_getaffinity(0))[: max(1, int(cpus))]
    pin = functools.partial(os.sched_setaffinity, 0, allowed)
    if memory is None:
        return pin

    def both() -> None:
        memory()
        pin()

    return both


def group_alive(pgid: int) -> bool:
    """True while any process (zombies included) remains in process group `pgid`."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stop_process_group(process: subprocess.Popen, grace_s: float = 3.0) -> int | None:
    """SIGTERM the group `process` leads, SIGKILL what is left after `grace_s`, reap it.

    Idempotent; returns the leader's exit code.
    """
    pgid = process.pid  # started with start_new_session: the leader's pid is the group id
    if group_alive(pgid) or process.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            process.poll()  # reap the leader so it stops counting as alive
            if not group_alive(pgid):
                break
            time.sleep(0.05)
        if group_alive(pgid):
            kill_process_group(pgid)
    with contextlib.suppress(subprocess.TimeoutExpired):  # SIGKILL cannot be ignored
        process.wait(timeout=max(grace_s, 5.0))
    # group members orphaned by the leader are reaped by init; give it a moment
    deadline = time.monotonic() + 2.0
    while group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return process.returncode


def die_with_parent_hook() -> Callable[[], None] | None:
    """A preexec_fn asking the kernel to SIGKILL the child when its parent dies (Linux only).

    The libc function is resolved here, in the parent, so the child runs no import and no
    allocation-heavy Python between fork and exec.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    kill = int(signal.SIGKILL)

    def hook() -> None:
        prctl(PR_SET_PDEATHSIG, kill, 0, 0, 0)

    return hook


def spawn(
    argv: Sequence[str],
    *,
    cwd: Path | None,
    env: Mapping[str, str],
    pass_fds: Sequence[int] = (),
) -> subprocess.Popen[bytes]:
    """Start a long-running process (a server) in its own session, stdout and stderr merged
    into one pipe, stdin closed, only `pass_fds` inherited; it is killed when this process
    dies. Raises OSError when `argv` cannot be started. The caller reads the pipe and stops
    the process group."""
    return subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=die_with_parent_hook(),
        pass_fds=tuple(pass_fds),
    )
