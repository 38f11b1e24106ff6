"""Launch a PACT server from a SystemProfile and wait until it is healthy.

`launch(profile, log_path=...)` fills `{host}`, `{port}` and `{python}` (the running
interpreter, never whatever `python` PATH finds) in the command (and in env values and cwd),
picking a free port when the profile's port is 0, starts the command in its own session
(process group) and polls GET `health_path` until it answers 200. If the process exits
first, or `startup_timeout_s` passes, the whole process group is killed and `LaunchError`
carries the log's tail. A sandboxed server carries bwrap's status pipe (`sandbox.process.
StatusPipe`, the rule every sandboxed command follows): when bwrap exits without having set
its sandbox up, the launch fails at once with bwrap's own words and `sandbox_error` set
(infrastructure, not the candidate's failure).

Given a `SandboxSpec` (improve's target servers: code a meta-agent wrote), the command runs
under the sandbox policy and its environment is the policy's plus the profile's env and
`extra_env`, nothing else of the host's; without one (the harness's own model server) the
child inherits os.environ overlaid the same way. Output reaches `log_path` through a pump
that redacts secrets line by line, so a server printing its environment or a key file
writes only `[REDACTED]` to disk. Only variable *names* are written to the log header.

A sandbox without network (improve's target servers) has only its own loopback: the server
listens there, and the relay publishes that port as a Unix socket in a private host directory
(`SandboxSpec.published`), which the harness's client connects to. No TCP port is opened on
the host, so nothing else on the machine (another sandbox sharing the host's network, another
user) can call the server. On Linux the server is also told to
die with its parent (PR_SET_PDEATHSIG), so a harness killed with SIGKILL leaves no server
behind; the signal follows the launching *thread*, so launch from a thread that outlives the
server (the improve loop launches from its main thread).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from subprocess import Popen
from typing import IO

from metaeval.errors import MetaevalError
from metaeval.loopback.access import new_token
from metaeval.protocols.improve.pact.client import PactClient
from metaeval.protocols.improve.pact.protocol import TOKEN_ENV
from metaeval.protocols.improve.profiles import SystemProfile
from metaeval.records.nofollow import open_file
from metaeval.records.redact import LineRedactor, redact_text
from metaeval.sandbox.bwrap import wrap_command
from metaeval.sandbox.policy import SandboxSpec
from metaeval.sandbox.process import STATUS_FD, StatusPipe
from metaeval.sandbox.process_group import spawn, stop_process_group

HEALTH_POLL_S = 0.1
LOG_TAIL_CHARS = 4000


class LaunchError(MetaevalError):
    """A system that did not become healthy. `log_tail` holds the end of its output."""

    def __init__(
        self,
        message: str,
        *,
        log_tail: str = "",
        log_path: Path | None = None,
        sandbox_error: str | None = None,
    ):
        self.log_tail = log_tail
        self.log_path = log_path
        self.sandbox_error = sandbox_error  # bwrap could not set the sandbox up: infrastructure
        text = message
        if log_path is not None:
            text += f" (log: {log_path})"
        if log_tail:
            text += f"\n--- log tail ---\n{log_tail}"
        super().__init__(text)


def free_port(host: str = "127.0.0.1") -> int:
    """A port that was free a moment ago: bind port 0 on `host` and read what the OS gave."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def log_tail(path: Path, chars: int = LOG_TAIL_CHARS) -> str:
    """The last `chars` characters of a log file ('' when it cannot be read)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - chars))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


class RunningSystem:
    """A launched PACT server: its URL, process, log; `stop()` ends its whole process group."""

    def __init__(
        self,
        profile: SystemProfile,
        process: Popen[bytes],
        *,
        host: str,
        port: int,
        log_path: Path,
        pump: threading.Thread | None = None,
        sandboxed: bool = False,
        unix_socket: Path | None = None,
        token: str | None = None,
        status: StatusPipe | None = None,
    ):
        self.profile = profile
        self.status = status  # bwrap's status pipe (read end) while the server runs
        self.token = token  # metaeval's own PACT server checks it (`server.TOKEN_ENV`)
        self.process = process
        self.host = host
        self.port = port
        self.log_path = log_path
        self.pump = pump
        self.sandboxed = sandboxed
        self.unix_socket = unix_socket  # where the harness reaches a network-less server
        self.base_url = f"http://{_url_host(host)}:{port}"

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def pgid(self) -> int:
        """The process group (== pid: the server was started in its own session)."""
        return self.process.pid

    def client(self, timeout_s: float = 300.0) -> PactClient:
        socket_path = str(self.unix_socket) if self.unix_socket is not None else None
        return PactClient(
            self.base_url, timeout_s=timeout_s, unix_socket=socket_path, token=self.token
        )

    def healthy(self, timeout_s: float = 5.0) -> bool:
        return self.client().health(self.profile.health_path, timeout_s=timeout_s)

    def alive(self) -> bool:
        """True while the server process itself is running."""
        return self.process.poll() is None

    def returncode(self) -> int | None:
        return self.process.poll()

    def log_tail(self, chars: int = LOG_TAIL_CHARS) -> str:
        return log_tail(self.log_path, chars)

    def stop(self, grace_s: float = 3.0) -> int | None:
        """SIGTERM the process group, SIGKILL what is left after `grace_s`; reap the server.

        Idempotent. Returns the server's exit code.
        """
        stop_process_group(self.process, grace_s)
        if self.pump is not None:
            self.pump.join(timeout=5.0)
        if self.status is not None:
            self.status.close()
        if self.unix_socket is not None:
            shutil.rmtree(self.unix_socket.parent, ignore_errors=True)
        return self.process.returncode

    def __enter__(self) -> RunningSystem:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"RunningSystem({self.profile.name!r}, {self.base_url}, pid={self.pid})"


PYTHON_PLACEHOLDER = "{python}"


def _fill(text: str, host: str, port: int) -> str:
    return (
        text.replace("{host}", host)
        .replace("{port}", str(port))
        .replace(PYTHON_PLACEHOLDER, sys.executable)
    )


def _append(log_path: Path) -> IO[bytes]:
    """The log opened for appending, never through a link (it lives in the bundle)."""
    return os.fdopen(open_file(Path(log_path), os.O_WRONLY | os.O_APPEND | os.O_CREAT), "ab")


def _pump_redacted(source: IO[bytes], log_path: Path) -> None:
    """Copy the server's output to the log line by line, secrets redacted, until EOF."""
    redactor = LineRedactor()
    with _append(log_path) as log_file:
        for line in iter(source.readline, b""):
            text = redactor.line(line.decode("utf-8", "replace"))
            log_file.write(text.encode())
            log_file.flush()
    with contextlib.suppress(OSError):
        source.close()


def launch(
    profile: SystemProfile,
    *,
    log_path: Path,
    extra_env: Mapping[str, str] | None = None,
    sandbox: SandboxSpec | None = None,
) -> RunningSystem:
    """Start `profile`'s server and return it once GET health_path answers 200.

    With `sandbox`, the server runs under that policy (working directory: the profile's cwd;
    environment: the policy's, the profile's env and `extra_env`). Raises LaunchError (with
    the log tail) when the command cannot start, exits before it is healthy, or is not
    healthy within `profile.startup_timeout_s`; the process group is stopped first.
    """
    host = profile.host
    port = profile.port or free_port(host)
    token = new_token()  # only the harness's client holds it (redacted from every log)
    extra_env = {**(extra_env or {}), TOKEN_ENV: token}
    command = _server_command(profile, host, port, extra_env, sandbox)
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    _log_launch(log_path, profile, command)
    status = StatusPipe(command.argv) if STATUS_FD in command.argv else None
    try:
        process = spawn(
            status.argv if status is not None else command.argv,
            cwd=command.cwd,
            env=command.env,
            pass_fds=status.pass_fds if status is not None else (),
        )
    except OSError as exc:
        if status is not None:
            status.close()
        if command.unix_socket is not None:
            shutil.rmtree(command.unix_socket.parent, ignore_errors=True)
        with _append(log_path) as log_file:
            log_file.write(f"# cannot start: {exc}\n".encode())
        raise LaunchError(
            f"{profile.name}: cannot start {command.argv[0]!r}: {exc}", log_path=log_path
        ) from exc
    finally:
        if status is not None:
            status.close_write_end()  # bwrap holds the only write end
    assert process.stdout is not None
    pump = threading.Thread(
        target=_pump_redacted, args=(process.stdout, log_path), daemon=True, name="pact-log"
    )
    pump.start()
    system = RunningSystem(
        profile,
        process,
        host=host,
        port=port,
        log_path=log_path,
        pump=pump,
        sandboxed=command.sandboxed,
        unix_socket=command.unix_socket,
        token=token,
        status=status,
    )
    _wait_healthy(system, process, profile, log_path)
    return system


@dataclass(frozen=True)
class _ServerCommand:
    """What `launch` runs: argv (wrapped in the sandbox when given), environment, working
    directory, and the Unix socket the server is published on when it has no network."""

    argv: list[str]
    env: dict[str, str]
    cwd: Path | None
    overlay: dict[str, str]
    sandboxed: bool
    unix_socket: Path | None


def _server_command(
    profile: SystemProfile,
    host: str,
    port: int,
    extra_env: Mapping[str, str] | None,
    sandbox: SandboxSpec | None,
) -> _ServerCommand:
    """The profile's command with {host}/{port} filled in, wrapped in `sandbox` if given."""
    argv = [_fill(a, host, port) for a in profile.command]
    cwd = Path(_fill(str(profile.cwd), host, port)) if profile.cwd is not None else None
    overlay = {k: _fill(v, host, port) for k, v in profile.env.items()}
    overlay.update(extra_env or {})
    if sandbox is None:
        return _ServerCommand(argv, {**os.environ, **overlay}, cwd, overlay, False, None)
    unix_socket: Path | None = None
    spec = replace(
        sandbox,
        env={**sandbox.env, **overlay},
        chdir=str(cwd.resolve()) if cwd is not None else sandbox.chdir,
    )
    if not spec.network:  # the harness reaches the server through a published socket
        unix_socket = Path(tempfile.mkdtemp(prefix="pact-")) / "pact.sock"
        spec = replace(spec, published=(*spec.published, (str(unix_socket), port)))
    argv, env, sandboxed = wrap_command(spec, argv, status_fd=True)
    return _ServerCommand(argv, env, cwd, overlay, sandboxed, unix_socket)


def _log_launch(log_path: Path, profile: SystemProfile, command: _ServerCommand) -> None:
    """The log's header line: what was started, where, how (secrets redacted)."""
    network = "host" if command.unix_socket is None else "none (published on a Unix socket)"
    with _append(log_path) as log_file:
        header = (
            f"# launch {profile.name}: argv={[redact_text(a) for a in command.argv]!r} "
            f"cwd={str(command.cwd) if command.cwd else None!r} sandboxed={command.sandboxed} "
            f"network={network} "
            f"env overrides={sorted(command.overlay)!r}\n"
        )
        log_file.write(header.encode())
        log_file.flush()


def _wait_healthy(
    system: RunningSystem, process: Popen[bytes], profile: SystemProfile, log_path: Path
) -> None:
    """Poll the health path until it answers 200; stop the server and raise LaunchError when
    it exits first or the startup time runs out."""
    client = system.client(timeout_s=5.0)
    deadline = time.monotonic() + profile.startup_timeout_s
    while True:
        code = process.poll()
        if code is not None:
            status, system.status = system.status, None  # read below, not closed by stop()
            system.stop(grace_s=1.0)
            tail = log_tail(log_path)
            reason = status.not_started(code, tail) if status is not None else None
            if reason is not None:
                raise LaunchError(
                    f"{profile.name}: the sandbox did not start: {reason}",
                    log_tail=tail,
                    log_path=log_path,
                    sandbox_error=reason,
                )
            raise LaunchError(
                f"{profile.name}: server exited with code {code} before it was healthy",
                log_tail=log_tail(log_path),
                log_path=log_path,
            )
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            system.stop()
            raise LaunchError(
                f"{profile.name}: not healthy at {system.base_url}{profile.health_path} "
                f"within {profile.startup_timeout_s:g}s",
                log_tail=log_tail(log_path),
                log_path=log_path,
            )
        if client.health(profile.health_path, timeout_s=max(0.05, min(2.0, remaining))):
            return
        time.sleep(min(HEALTH_POLL_S, max(0.0, deadline - time.monotonic())))
