"""The adapter template every CLI agent fills in: it runs the CLI in a workspace (through the
gateway when the model is not the CLI's own), reads its output stream and turns it into an
`AgentResult`. Stream reading is in `metaeval.agents.cli.stream`, shell-command
classification in `metaeval.agents.shell_commands`, locating binaries in
`metaeval.agents.cli.binaries`.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from metaeval.agents.cli.binaries import install_root, private_home, resolve_binary, tools_dir
from metaeval.agents.cli.outcome import memory_outcome, settle_with_gateway, stream_outcome
from metaeval.agents.cli.stream import ParsedStream
from metaeval.agents.types import (
    AgentResult,
    Limits,
    Task,
    TranscriptEvent,
    list_files,
)
from metaeval.errors import ConfigError
from metaeval.transient import is_transient

if TYPE_CHECKING:
    from metaeval.sandbox.workspace import Workspace

DEFAULT_CLI_MEMORY_MB = 4096
"""Default cgroup memory cap of a CLI run: Claude Code ran at 4 GiB of address space, and
its resident memory stays far below."""


TIME_LIMIT_GRACE_S = 15.0
"""How long past its time limit a CLI run may return: after the kill, `run_process` waits
at most KILL_REAP_S for the pipes and again for the process, the memory cgroup is emptied
within 5 s, and the gateway link's listener stops within a poll; the parse and cleanup that
follow take well under a second. Measured with the real CLIs against a stalled model: 0.2-0.5 s."""

MIN_RUN_S = 0.5
"""The least time a CLI is given when setting up its run used up its whole limit (it then
times out at once, and the result says so)."""


@dataclass
class _Launch:
    """How one run starts: the argv, its environment and network, the host paths it sees,
    and its link to the gateway (None when the CLI talks to its provider itself)."""

    argv: list[str]
    env: dict[str, str]
    network: bool
    ro_binds: list[Path]
    rw_binds: list[Path]
    link: Any = None


def remaining_time(limits: Limits, started: float) -> float:
    """What is left of the run's time limit, for a run that started at monotonic `started`."""
    return max(MIN_RUN_S, limits.time_limit_s - (time.monotonic() - started))


def _decode(data: Any) -> str:
    if data is None:
        return ""
    if isinstance(data, bytes):
        return data.decode("utf-8", errors="replace")
    return str(data)


class CLIAdapter:
    """Runs one coding-agent CLI in a workspace and parses what it printed.

    Subclasses set `name`, `default_binary`, `install_hint` and implement `build_argv` and
    `parse_output`. Given a metaeval model (``local/smollm2``, ``replay/FILE``) or a `gateway`,
    the CLI runs with no network but a relay to the gateway (see `metaeval.gateway.attach`),
    and the gateway's token count is the run's usage (`AgentResult.cli_usage` keeps the CLI's
    own report).
    """

    name: ClassVar[str] = ""
    default_binary: ClassVar[str] = ""
    product: ClassVar[str] = ""  # human name for the not-installed message
    install_hint: ClassVar[str] = "`make clis`"
    # Host variables the CLI needs to reach its provider; only these cross into the sandbox.
    credential_env: ClassVar[tuple[str, ...]] = ()
    # Address-space limit. None for JIT/Wasm runtimes (node, bun), which reserve far more
    # virtual memory than they use: they are bounded by the cgroup cap below instead.
    memory_mb: ClassVar[int | None] = None
    # Real-memory cap by cgroup (resident memory of the whole sandboxed tree); where no
    # cgroup can be made the run is bounded by time only and the transcript says so.
    memory_cgroup_mb: int | None = DEFAULT_CLI_MEMORY_MB
    # Variables that switch off the CLI's telemetry, update checks and other phoning home.
    quiet_env: ClassVar[dict[str, str]] = {}
    # The model name the CLI sends when it runs on a gateway (any name; the gateway answers).
    gateway_model: ClassVar[str] = "metaeval"
    # Effort levels the CLI takes (see `effort_args` / `prepare_home`); empty: no such setting.
    efforts: ClassVar[tuple[str, ...]] = ()

    def __init__(
        self,
        model: str | None = None,
        binary: str | None = None,
        extra_args: Sequence[str] = (),
        home: Path | None = None,
        gateway: Any = None,
        effort: str | None = None,
        env: Mapping[str, str] | None = None,
        base_url: str | None = None,
        api_key_env: str | None = None,
    ):
        """`home`: a HOME to bind writable (e.g. a logged-in CLI's real home); default: a
        fresh private directory per run, so runs never share CLI state. `model`: the CLI's own
        model name, or a metaeval model to serve through a gateway. `gateway`: a running
        `metaeval.gateway.Gateway` to use instead. `effort`: a level of `efforts` passed to the
        CLI's own setting ("default" or None: the CLI's default). `env`: extra variables for
        the CLI; `base_url` and `api_key_env` (the name of a host variable holding the key)
        point this agent at its own provider endpoint (a gateway replaces both)."""
        from metaeval.gateway.attach import is_metaeval_model

        self.served_model = model if gateway is None and is_metaeval_model(model) else None
        self.model = None if (self.served_model or gateway is not None) else model
        self.binary = binary or self.default_binary
        self.extra_args = list(extra_args)
        # the tools the CLI may offer, in its own names (None: all); set by improve's lane
        # tool menu (`metaeval.protocols.improve.lane_tools`) for the CLIs that enforce one
        self.allowed_tools: list[str] | None = None
        self.home = home
        self.gateway = gateway
        self.effort = None if effort in (None, "default") else effort
        if self.effort is not None and self.efforts and self.effort not in self.efforts:
            raise ConfigError(
                f"{self.name} takes effort {', '.join(self.efforts)} (or default), "
                f"not {self.effort!r}",
                field="effort",
            )
        self.extra_env = dict(env or {})
        self.base_url = base_url
        self.api_key_env = api_key_env
        self._runs = itertools.count(1)
        self._local = threading.local()

    @property
    def effort_setting(self) -> str | None:
        """How the effort reaches the CLI, for the records: e.g. ``--effort high``; None when no
        effort is asked for; 'not applicable (...)' when the CLI has no such setting."""
        if self.effort is None:
            return None
        if not self.efforts:
            return f"not applicable ({self.name} has no effort setting)"
        return " ".join(self.effort_args()) or self.effort_note()

    def effort_args(self) -> list[str]:
        """Command-line arguments carrying the effort (none by default)."""
        return []

    def effort_note(self) -> str:
        """Where the effort goes when it is not an argument (e.g. a settings file)."""
        return f"not applicable ({self.name} has no effort setting)"

    def endpoint_env(self, base_url: str | None, api_key: str | None) -> dict[str, str]:
        """Variables pointing the CLI at this agent's own endpoint and key (none by default)."""
        return {}

    def endpoint_args(self, base_url: str) -> list[str]:
        """Arguments pointing the CLI at this agent's own endpoint (none by default)."""
        return []

    def _api_key(self) -> str | None:
        if self.api_key_env is None:
            return None
        value = os.environ.get(self.api_key_env)
        if not value:
            raise ConfigError(
                f"{self.name}: the variable {self.api_key_env} named by api_key_env is not set",
                field="api_key_env",
            )
        return value

    def command(self, task: Task, workspace: Workspace, limits: Limits) -> list[str]:
        """The argv the CLI runs with (off the gateway): `build_argv` plus the agent's settings
        (effort, own endpoint) right after the binary."""
        argv = self.build_argv(task, workspace, limits)
        settings = self.effort_args()
        if self.base_url and self._gateway() is None:
            settings += self.endpoint_args(self.base_url)
        return [argv[0], *settings, *argv[1:]]

    def run_home(self) -> Path:
        """The HOME of the run in progress on this thread."""
        return self._local.home

    def sandbox_env(self, home: Path) -> dict[str, str]:
        """The CLI's environment inside the sandbox: its credential variables (or this agent's
        own endpoint and key), the agent's extra `env`, and HOME."""
        env = {name: os.environ[name] for name in self.credential_env if os.environ.get(name)}
        if self.base_url or self.api_key_env:
            env.update(self.endpoint_env(self.base_url, self._api_key()))
        env.update(self.extra_env)
        env.update(self.quiet_env)
        env["HOME"] = str(home)
        return env

    def gateway_env(self, base_url: str, home: Path, api_key: str) -> dict[str, str]:
        """Environment pointing the CLI at a gateway (replaces its credentials): `api_key` is
        the run's gateway token, which the CLI sends as its API key."""
        raise NotImplementedError

    def gateway_args(self, base_url: str) -> list[str]:
        """Extra arguments pointing the CLI at a gateway (none by default)."""
        return []

    def prepare_home(self, home: Path, task: Task, on_gateway: bool) -> None:
        """Write the CLI's settings into a fresh private home (nothing by default)."""

    def build_argv(self, task: Task, workspace: Workspace, limits: Limits) -> list[str]:
        raise NotImplementedError

    def fill_from_gateway(
        self, transcript: list[TranscriptEvent], delivered: dict[str, str]
    ) -> list[TranscriptEvent]:
        """Complete tool results the CLI's stream leaves out, from what the gateway saw
        delivered to the model (`delivered`: tool call id -> result text). None by default."""
        return transcript

    def parse_output(self, stdout: str, task: Task, workspace: Workspace) -> ParsedStream:
        raise NotImplementedError

    def prepare(self, task: Task, workspace: Workspace) -> None:
        """Get ready for a run, before the workspace is listed (nothing by default)."""

    def own_files(self, task: Task, workspace: Workspace) -> set[str]:
        """Workspace-relative files the adapter itself creates (excluded from files_produced)."""
        return set()

    def cleanup(self, task: Task, workspace: Workspace) -> None:
        """Remove adapter-owned files after a run (none by default)."""

    def not_found_message(self) -> str:
        return (
            f"{self.binary} not found in {tools_dir() / 'node_modules' / '.bin'} or on PATH "
            f"(install {self.product} with {self.install_hint} to use agent {self.name})"
        )

    def _gateway(self) -> Any:
        if self.gateway is not None:
            return self.gateway
        if self.served_model is not None:
            from metaeval.gateway.attach import shared_gateway

            return shared_gateway(self.served_model)
        return None

    def run(self, task: Task, workspace: Workspace, limits: Limits) -> AgentResult:
        """Run the CLI on `task`; never raises: failures come back as status 'error'.

        The time limit counts from this call's start (setting up the home and the gateway
        link spends from it) and the CLI is killed when it runs out; the call returns within
        the limit plus the bounded waits after the kill (`TIME_LIMIT_GRACE_S`). The result's
        `wall_clock_s` is the whole call and `time_limit_s` the limit, so an overrun shows."""
        started = time.monotonic()
        out = self._run_once(task, workspace, limits, started)
        waited = time.monotonic() - started
        return out.model_copy(update={"wall_clock_s": waited, "time_limit_s": limits.time_limit_s})

    def _run_once(
        self, task: Task, workspace: Workspace, limits: Limits, started: float
    ) -> AgentResult:
        binary = resolve_binary(self.binary)
        if binary is None:
            return AgentResult(status="error", error=self.not_found_message())
        fresh_home = None if self.home else private_home()
        home = self.home or fresh_home
        assert home is not None
        self._local.home = home
        launch: _Launch | None = None
        try:
            self.prepare(task, workspace)
            before = list_files(Path(workspace.path))
            launch = self._launch(task, workspace, limits, binary, home)
            if fresh_home is not None:
                self.prepare_home(home, task, on_gateway=launch.link is not None)
            result = workspace.exec(
                launch.argv,
                timeout_s=remaining_time(limits, started),
                memory_mb=self.memory_mb,
                memory_cgroup_mb=self.memory_cgroup_mb,
                network=launch.network,
                env=launch.env,
                extra_ro_binds=launch.ro_binds,
                extra_rw_binds=launch.rw_binds,
            )
            return self._outcome(task, workspace, result, before, limits, launch)
        except Exception as exc:  # never raise out of run()
            with contextlib.suppress(Exception):
                self.cleanup(task, workspace)
            return AgentResult(
                status="error",
                infra_error=is_transient(exc),  # a deterministic failure is not retried
                error=f"{self.name}: {type(exc).__name__}: {exc}",
            )
        finally:
            if launch is not None and launch.link is not None:
                launch.link.close()
            if fresh_home is not None:
                shutil.rmtree(fresh_home, ignore_errors=True)

    def _launch(
        self, task: Task, workspace: Workspace, limits: Limits, binary: Path, home: Path
    ) -> _Launch:
        """The argv, environment, network and binds of the run: through a fresh link to the
        gateway (no network but the relay) when there is one, else straight to the provider."""
        from metaeval.gateway.attach import RELAY_SCRIPT, open_link
        from metaeval.sandbox.bwrap import use_bwrap

        argv = self.command(task, workspace, limits)
        argv[0] = str(binary)
        launch = _Launch(argv, self.sandbox_env(home), True, [install_root(binary)], [home])
        gateway = self._gateway()
        if gateway is None:
            return launch  # the CLI talks to its provider's API
        for name in self.credential_env:
            launch.env.pop(name, None)
        tag = f"{self.name}-{os.getpid()}-{id(self):x}-{next(self._runs)}"
        link = launch.link = open_link(gateway, tag, sandboxed=use_bwrap())
        try:
            launch.env.update(self.gateway_env(link.base_url, home, link.token))
            launch.argv = link.wrap([*argv[:1], *self.gateway_args(link.base_url), *argv[1:]])
        except BaseException:
            link.close()  # the run never started: nothing else will close it
            raise
        if link.socket_dir is not None:
            launch.rw_binds.append(link.socket_dir)
            # the relay runs on this Python's base interpreter (stdlib only)
            launch.ro_binds += [RELAY_SCRIPT.parent, Path(sys.base_prefix).resolve()]
        launch.network = False  # the relay is the only way out
        return launch

    def _outcome(
        self,
        task: Task,
        workspace: Workspace,
        result: Any,
        before: set[str],
        limits: Limits,
        launch: _Launch,
    ) -> AgentResult:
        """Parse what the CLI printed, list what it wrote, clean up, and settle the result
        with its memory outcome and the gateway's count."""
        stdout = _decode(getattr(result, "stdout", ""))
        stderr = _decode(getattr(result, "stderr", ""))
        timed_out = bool(getattr(result, "timed_out", False))
        returncode = getattr(result, "returncode", None)
        not_started = getattr(result, "sandbox_error", None)
        if not_started:  # the CLI never ran: infrastructure, retried
            self.cleanup(task, workspace)
            return AgentResult(
                status="error",
                stop_reason="sandbox_error",
                infra_error=True,
                error=f"{self.name}: the sandbox did not start: {not_started}",
            )
        parsed = self.parse_output(stdout, task, workspace)
        after = list_files(Path(workspace.path))
        produced = sorted(after - before - self.own_files(task, workspace))
        self.cleanup(task, workspace)
        out = stream_outcome(self.name, parsed, produced, timed_out, returncode, stderr, limits)
        out = memory_outcome(out, result, self)
        if launch.link is not None:
            out = settle_with_gateway(out, launch.link, self)
        return out
