"""Run one process tree with a deadline, a memory limit and capped output.

The child starts in its own session, so its process group holds everything it spawns
(unless something calls setsid itself). On timeout the whole group gets SIGKILL; under
bwrap that kills the outer bwrap, whose sandbox init dies with it (--die-with-parent) and
takes the whole PID namespace down. Output is read with a selector loop rather than
`communicate()` so that memory stays bounded by the cap and a pipe held open by a stray
grandchild can never stall the caller.

A bwrap argv carrying the `STATUS_FD` placeholder (`policy.bwrap_argv(spec, status_fd=True)`)
gets the write end of a pipe of run_process's own in its place. bubblewrap writes an
`exit-code` document there only when its sandbox was set up and the command started; a run
that ended by itself without one never got a sandbox (a bind source missing, a mount or
namespace refused, the network not set up): its result says so in `sandbox_error`, with
returncode None and `sandboxed` False. A program that cannot be executed in a sandbox that
was set up (bwrap's `execvp` error) stays the command's own failure. Only bubblewrap holds that pipe (the sandbox does not
inherit it), so a sandboxed program that prints `bwrap: ...` and fails is still its own
failure.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from pydantic import BaseModel

from metaeval.sandbox.cgroup import MemoryCgroup
from metaeval.sandbox.process_group import (
    chain_hooks,
    file_size_limiter,
    kill_process_group,
    limiter,
    open_cgroup,
)

DEFAULT_MAX_OUTPUT_BYTES = 1024 * 1024
"""Per-stream output cap (stdout and stderr each)."""

EXIT_DRAIN_S = 1.0
"""After the main process exits, how long to wait for pipes held by its children."""

KILL_REAP_S = 3.0
"""After SIGKILL, how long to wait for the process and its pipes before giving up."""

STATUS_FD = "{metaeval-json-status-fd}"
"""Placeholder for bwrap's `--json-status-fd` argument (see the module docstring)."""

_POLL_S = 0.05
WATCH_INTERVAL_S = 1.0
_CHUNK = 64 * 1024


class ExecResult(BaseModel):
    """Outcome of one command.

    `returncode` is None when the command was killed for exceeding its timeout (or could
    not be reaped). `stdout_bytes`/`stderr_bytes` are the raw sizes produced; when one
    exceeds `max_output_bytes` the text keeps the head and tail with an omission marker
    between them and the matching `*_truncated` flag is set.
    """

    returncode: int | None
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    duration_s: float = 0.0
    sandboxed: bool = False
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES
    # Set when a memory cgroup capped the run and the kernel's OOM killer ended a process in it.
    oom_killed: bool = False
    # How memory was bounded when a cgroup cap was asked for: "cgroup v1, 4096 MiB", or why
    # none could be made ("no memory cgroup: ...; bounded by time only").
    memory_note: str | None = None
    # How often the cgroup's usage reached the cap (memory pressure, with or without a kill).
    memory_cap_hits: int = 0
    # Set when the command broke a limit other than time or memory and failed for it:
    # "wrote more than 2048 MiB to /tmp". Said by the harness, never parsed from the output.
    limit_exceeded: str | None = None
    # Set when bubblewrap could not set the sandbox up, so the command never started
    # (infrastructure): its own reason, e.g. "bwrap: Can't find source path /x: ...".
    sandbox_error: str | None = None

    def describe(self, command: str, cap: Callable[[str], str] | None = None) -> str:
        """A log transcript: `$ command   [status, duration]`, then stdout and stderr
        (each passed through `cap` when given, e.g. to shorten it)."""
        if self.timed_out:
            status = "timed out"
        elif self.oom_killed:
            status = f"out of memory, exit {self.returncode}"
        elif self.limit_exceeded:
            status = f"{self.limit_exceeded}, exit {self.returncode}"
        elif self.sandbox_error:
            status = "the sandbox did not start"
        elif self.returncode is None:
            status = "did not run"
        else:
            status = f"exit {self.returncode}"
        lines = [f"$ {command}   [{status}, {self.duration_s:.2f} s]"]
        for name, text in (("stdout", self.stdout), ("stderr", self.stderr)):
            if text:
                lines += [f"--- {name} ---", (cap(text) if cap else text).rstrip("\n")]
        return "\n".join(lines)

    @property
    def ok(self) -> bool:
        """True when the command finished in time with exit code 0, within its limits."""
        return self.returncode == 0 and not self.timed_out and self.limit_exceeded is None


class SandboxNotStarted(Exception):
    """A command's sandbox could not be set up (`ExecResult.sandbox_error`): infrastructure,
    for callers that end a run on it rather than hand the result on."""


def require_started(result: ExecResult) -> ExecResult:
    """`result`, or SandboxNotStarted when its sandbox never started."""
    if result.sandbox_error:
        raise SandboxNotStarted(f"the sandbox did not start: {result.sandbox_error}")
    return result


class _CappedBuffer:
    """Keeps the first and last bytes of a stream up to `limit` in total, counting all."""

    def __init__(self, limit: int) -> None:
        self.limit = max(0, limit)
        self.head_limit = self.limit - self.limit // 2
        self.tail_limit = self.limit // 2
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data and self.tail_limit:
            self.tail += data
            if len(self.tail) > self.tail_limit:
                del self.tail[: len(self.tail) - self.tail_limit]

    @property
    def truncated(self) -> bool:
        return self.total > self.limit

    def text(self) -> str:
        head = self.head.decode("utf-8", errors="replace")
        tail = self.tail.decode("utf-8", errors="replace")
        if not self.truncated:
            return head + tail
        omitted = self.total - len(self.head) - len(self.tail)
        return f"{head}\n[... {omitted} bytes omitted, {self.total} bytes in total ...]\n{tail}"


def run_process(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout_s: float,
    memory_mb: int | None = None,
    stdin: str | bytes | None = None,
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
    sandboxed: bool = False,
    memory_cgroup_mb: int | None = None,
    cpus: int | None = None,
    file_size_mb: int | None = None,
    watch: Callable[[], str | None] | None = None,
) -> ExecResult:
    """Run `argv` as a new session, kill its whole group on timeout, and capture output.

    `memory_mb` caps the address space (RLIMIT_AS); `cpus` pins the process tree to that
    many of the CPUs available; `file_size_mb` caps the size of any file it writes
    (RLIMIT_FSIZE). `watch` is called about every second while the command runs and once
    after it: a reason it returns kills the group and becomes `limit_exceeded`.

    Never blocks much past `timeout_s`: after the kill it waits at most KILL_REAP_S.
    Processes left in the group after the main process exits are killed too, so nothing
    outlives the call. An argv that cannot be started gives returncode 127.

    `memory_mb` sets RLIMIT_AS (address space: unsuitable for JIT/Wasm runtimes);
    `memory_cgroup_mb` caps real memory with a cgroup (`metaeval.sandbox.cgroup`), and a
    process the kernel's OOM killer ends there sets `oom_killed`. Where no cgroup can be
    made, the run is bounded by time only and `memory_note` says why.
    """
    group, note = open_cgroup(memory_cgroup_mb)
    update: dict[str, object] = {"memory_note": note} if note else {}
    try:
        limits = chain_hooks(limiter(memory_mb, cpus), file_size_limiter(file_size_mb))
        result = _run(
            argv, cwd, env, timeout_s, limits, stdin, max_output_bytes, sandboxed, group, watch
        )
    finally:
        if group is not None:
            update["oom_killed"] = group.oom_kills() > 0
            update["memory_cap_hits"] = group.limit_hits()
            group.close()  # kills stragglers (also after a timeout) and removes the cgroup
    return result.model_copy(update=update) if update else result


def _run(
    argv: Sequence[str],
    cwd: Path,
    env: Mapping[str, str],
    timeout_s: float,
    limits: Callable[[], None] | None,
    stdin: str | bytes | None,
    max_output_bytes: int,
    sandboxed: bool,
    group: MemoryCgroup | None,
    watch: Callable[[], str | None] | None = None,
) -> ExecResult:
    start = time.monotonic()
    out, err = _CappedBuffer(max_output_bytes), _CappedBuffer(max_output_bytes)
    join = group.join_hook() if group is not None else None
    status = StatusPipe(argv) if STATUS_FD in argv else None
    try:
        proc = subprocess.Popen(
            status.argv if status is not None else list(argv),
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=chain_hooks(limits, join),
            close_fds=True,
            pass_fds=status.pass_fds if status is not None else (),
        )
    except OSError as exc:
        err.add(f"metaeval: cannot start {argv[0]!r}: {exc}\n".encode())
        if status is not None:
            status.command_started()  # closes its read end
        return _result(127, out, err, False, start, sandboxed, max_output_bytes)
    finally:
        if status is not None:
            status.close_write_end()

    pgid = proc.pid  # start_new_session makes the child its own group leader
    watcher = _Watcher(watch, pgid) if watch is not None else None
    try:
        timed_out = _pump(proc, pgid, stdin, start + timeout_s, out, err, watcher)
    finally:
        kill_process_group(pgid)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
    try:
        returncode = proc.wait(timeout=KILL_REAP_S)
    except subprocess.TimeoutExpired:
        returncode = None
    result = _result(
        None if timed_out else returncode, out, err, timed_out, start, sandboxed, max_output_bytes
    )
    if watcher is not None:
        watcher.check(time.monotonic(), final=True)
        if watcher.reason is not None:
            result = result.model_copy(update={"limit_exceeded": watcher.reason})
    if status is not None:
        reason = status.not_started(result.returncode, result.stderr)
        if reason is not None and result.limit_exceeded is None:
            update = {"returncode": None, "sandboxed": False, "sandbox_error": reason}
            result = result.model_copy(update=update)
    return result


class StatusPipe:
    """The pipe bubblewrap reports its sandbox's status on (see the module docstring): `argv`
    is the command with `STATUS_FD` filled in, `pass_fds` what its Popen must pass; after
    starting it, `close_write_end`; once it ended, `not_started` (or `close` when not asked)."""

    def __init__(self, argv: Sequence[str]) -> None:
        self.read_fd, self.write_fd = os.pipe()
        os.set_blocking(self.read_fd, False)
        self.argv = [str(self.write_fd) if a == STATUS_FD else a for a in argv]
        self.pass_fds = (self.write_fd,)

    def close_write_end(self) -> None:
        if self.write_fd >= 0:
            os.close(self.write_fd)
            self.write_fd = -1

    def not_started(self, returncode: int | None, output: str) -> str | None:
        """Why the sandbox was never set up (bwrap's own words from `output`), or None: the
        command started, was killed (`returncode` None or negative), or is a program bwrap
        could not execute in a sandbox it did set up (the command's own failure). Reads the
        pipe and closes it."""
        started = self.command_started()
        if started or returncode is None or returncode < 0:
            return None
        reason = _setup_reason(output, returncode)
        return None if reason.startswith(_EXEC_FAILED) else reason

    def close(self) -> None:
        """Close both ends without reading (idempotent)."""
        self.close_write_end()
        if self.read_fd >= 0:
            os.close(self.read_fd)
            self.read_fd = -1

    def command_started(self) -> bool:
        """True when bubblewrap reported the command's exit code (its sandbox was set up);
        reads what is there now and closes the pipe."""
        if self.read_fd < 0:
            return False
        data = bytearray()
        try:
            while len(data) < 1 << 20:
                chunk = os.read(self.read_fd, _CHUNK)
                if not chunk:
                    break
                data += chunk
        except BlockingIOError:
            pass
        finally:
            os.close(self.read_fd)
            self.read_fd = -1
        for line in bytes(data).splitlines():
            with contextlib.suppress(ValueError):
                document = json.loads(line)
                if isinstance(document, dict) and "exit-code" in document:
                    return True
        return False


_EXEC_FAILED = "bwrap: execvp "
"""bwrap's words when the sandbox was set up but the command's program could not be run
(read only when no exit-code came, so only bwrap itself can have written them)."""


def _setup_reason(stderr: str, returncode: int | None) -> str:
    """Why the sandbox did not start: the last line bubblewrap (or metaeval's network
    setup) wrote, else the exit status. Only a description: the verdict comes from the pipe."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    said = [ln for ln in lines if ln.startswith("bwrap:")]
    said = said or [ln for ln in lines if ln.startswith("metaeval:")]
    text = said[-1] if said else f"bwrap exited {returncode} before starting the command"
    return text[:500]


class _Watcher:
    """Calls `watch` about every WATCH_INTERVAL_S (longer when a call is slow) and kills the
    group at the first reason it gives."""

    def __init__(self, watch: Callable[[], str | None], pgid: int):
        self.watch = watch
        self.pgid = pgid
        self.reason: str | None = None
        self.next_at = time.monotonic() + WATCH_INTERVAL_S

    def check(self, now: float, final: bool = False) -> None:
        if self.reason is not None or (not final and now < self.next_at):
            return
        began = time.monotonic()
        self.reason = self.watch()
        spent = time.monotonic() - began
        self.next_at = time.monotonic() + max(WATCH_INTERVAL_S, 10 * spent)
        if self.reason is not None and not final:
            kill_process_group(self.pgid)


def _result(
    returncode: int | None,
    out: _CappedBuffer,
    err: _CappedBuffer,
    timed_out: bool,
    start: float,
    sandboxed: bool,
    max_output_bytes: int,
) -> ExecResult:
    return ExecResult(
        returncode=returncode,
        stdout=out.text(),
        stderr=err.text(),
        timed_out=timed_out,
        duration_s=round(time.monotonic() - start, 3),
        sandboxed=sandboxed,
        stdout_bytes=out.total,
        stderr_bytes=err.total,
        stdout_truncated=out.truncated,
        stderr_truncated=err.truncated,
        max_output_bytes=max_output_bytes,
    )


def _pump(
    proc: subprocess.Popen,
    pgid: int,
    stdin: str | bytes | None,
    deadline: float,
    out: _CappedBuffer,
    err: _CappedBuffer,
    watcher: _Watcher | None = None,
) -> bool:
    """Feed stdin and drain stdout/stderr until done; returns True when the deadline hit."""
    sel, pending = _selector(proc, stdin, out, err)
    timed_out = False
    stop_at: float | None = None  # set once the main process exited or was killed
    stragglers_killed = False
    try:
        while True:
            now = time.monotonic()
            running = proc.poll() is None
            if watcher is not None and running:
                watcher.check(now)
            if running and not timed_out and now >= deadline:
                kill_process_group(pgid)
                timed_out, stragglers_killed = True, True
                stop_at = now + KILL_REAP_S
            elif not running and stop_at is None:
                stop_at = now + EXIT_DRAIN_S
            if not sel.get_map() and not running:
                return timed_out
            if stop_at is not None and now >= stop_at:
                if stragglers_killed:
                    return timed_out
                kill_process_group(pgid)  # children still hold our pipes
                stragglers_killed = True
                stop_at = now + KILL_REAP_S
            limit = stop_at if stop_at is not None else deadline
            wait = max(0.0, min(_POLL_S, limit - now))
            if not sel.get_map():
                time.sleep(wait)
                continue
            for key, _ in sel.select(wait):
                if key.data is None:
                    pending = _feed(proc, sel, key.fd, pending)
                    continue
                chunk = os.read(key.fd, _CHUNK)
                if chunk:
                    key.data.add(chunk)
                else:
                    sel.unregister(key.fd)
    finally:
        sel.close()


def _selector(
    proc: subprocess.Popen, stdin: str | bytes | None, out: _CappedBuffer, err: _CappedBuffer
) -> tuple[selectors.BaseSelector, memoryview]:
    """A selector on the child's stdout and stderr (read into `out` and `err`) and, while
    there is `stdin` to feed, its stdin; returns it with the stdin bytes still to write."""
    sel = selectors.DefaultSelector()
    assert proc.stdout is not None and proc.stderr is not None
    sel.register(proc.stdout.fileno(), selectors.EVENT_READ, out)
    sel.register(proc.stderr.fileno(), selectors.EVENT_READ, err)
    pending = memoryview(stdin if isinstance(stdin, bytes) else (stdin or "").encode())
    if proc.stdin is not None:
        os.set_blocking(proc.stdin.fileno(), False)
        if pending:
            sel.register(proc.stdin.fileno(), selectors.EVENT_WRITE, None)
        else:
            proc.stdin.close()
    return sel, pending


def _feed(
    proc: subprocess.Popen, sel: selectors.BaseSelector, fd: int, pending: memoryview
) -> memoryview:
    """Write what the stdin pipe accepts; close it when done or when the reader is gone."""
    try:
        written = os.write(fd, pending[:_CHUNK])
        pending = pending[written:]
    except BlockingIOError:
        return pending
    except (BrokenPipeError, OSError):
        pending = pending[:0]
    if not pending:
        sel.unregister(fd)
        assert proc.stdin is not None
        with contextlib.suppress(OSError):
            proc.stdin.close()
    return pending
