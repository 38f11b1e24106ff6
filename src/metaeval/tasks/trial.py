"""One Harbor trial, the same for every caller: a fresh /app, the agent phase, the tests, the
reward.

`run_trial` opens a room on a backend (`metaeval.tasks.rooms`: bubblewrap or a container
engine), runs an agent in the agent phase (`PhaseAgent`: any metaeval agent bound by
`metaeval.agents.in_trial.TrialAgent`, the oracle and the null agent among them) or a callable
that drives the room itself, then `bash /tests/test.sh` in the verifier phase, and reads the
reward the tests left in /logs/verifier (`metaeval.tasks.reward`). The limits of both phases
come from task.toml through `metaeval.tasks.limits`. As in Harbor, an agent that sees the
solution (the oracle) gets /solution and task.toml's `[solution.env]`, the tests get
`[verifier.env]`; any other agent gets neither. What `limits` noted about those tables heads
the trial log, then every command the agent ran, then the tests.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Generic, Protocol, Self, TypeVar

from pydantic import BaseModel, Field

from metaeval.sandbox.file_views import CommandViews
from metaeval.sandbox.process import ExecResult
from metaeval.tasks.limits import Phase, TrialLimits
from metaeval.tasks.reward import read_reward
from metaeval.tasks.safe_files import remove_tree
from metaeval.tasks.verifier_cases import read_reports

TEST_COMMAND = "bash /tests/test.sh"

OnCommand = Callable[[str, ExecResult], object]
"""Told of each command an agent phase ran, with its result."""


class PhaseAgent(Protocol):
    """What `run_trial` runs in the agent phase: `solve` works in `env` (the room's agent
    phase, /app) within `timeout_s`; an agent that `sees_solution` gets /solution and
    task.toml's `[solution.env]` there (the oracle)."""

    @property
    def sees_solution(self) -> bool: ...

    def solve(self, env: AgentPhase, task_root: Path, timeout_s: float) -> object: ...


class Room(abc.ABC):
    """One trial's environment: /app, /logs/verifier and the phases run in it."""

    def __init__(self, limits: TrialLimits, verifier_logs: Path) -> None:
        self.limits = limits
        self.verifier_logs = verifier_logs  # host directory seen at /logs/verifier by the tests
        self.notes: list[str] = []  # what seeding /app left out
        self.header: str | None = None  # first line of the trial log, if any

    @abc.abstractmethod
    def exec(
        self,
        command: str,
        phase: Phase,
        *,
        timeout_s: float | None = None,
        show: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
    ) -> ExecResult:
        """Run `command` with bash in /app under the limits of `phase` (time capped further
        by `timeout_s`), with the task directories named in `show` visible and the
        variables `env` set for this command only."""

    @abc.abstractmethod
    def read_file(self, path: str) -> bytes:
        """The regular file `path` (`/app/<rel>` or `<rel>`) of /app as the agent left it
        (errors as `metaeval.sandbox.environment` documents)."""

    @abc.abstractmethod
    def write_file(self, path: str, data: bytes) -> str:
        """Write an agent's file to `/app/<rel>` (`path` is `/app/<rel>` or `<rel>`) as the
        agent phase could, and return `/app/<rel>` (errors as `metaeval.sandbox.environment`
        documents)."""

    @abc.abstractmethod
    def app_snapshot(self, dest: Path) -> Path:
        """A host directory holding /app's regular files as they are now (`dest`, an absent
        path, when /app has to be copied out; else the room's own host copy)."""

    def agent_env(
        self, *, solution: bool = False, on_command: OnCommand | None = None
    ) -> AgentPhase:
        """The agent phase of this room as an `Environment` (with /solution and task.toml's
        `[solution.env]` when `solution`; `on_command` hears of each command run)."""
        return AgentPhase(self, solution=solution, on_command=on_command)

    def test(self) -> ExecResult:
        """Run the task's tests in the verifier phase and leave what they wrote as reward
        files in `verifier_logs`.

        First `end_agent_phase` kills every process the agent phase started and gives the
        tests a fresh /logs/verifier; afterwards `collect_verifier_logs` brings the reward
        files to the host. So the reward read afterwards is what the tests wrote, never a
        leftover of the agent nor the write of a process it left running.
        """
        for entry in list(self.verifier_logs.iterdir()):
            remove_tree(entry)  # never follows a link left there
        self.end_agent_phase()
        result = self.exec(
            TEST_COMMAND, "verifier", show=("tests",), env=self.limits.verifier_env.values
        )
        self.collect_verifier_logs()
        return result

    @abc.abstractmethod
    def end_agent_phase(self) -> None:
        """Make sure no process of the agent phase runs any more, and that the tests' own
        /logs/verifier is empty and was never writable by the agent phase."""

    def collect_verifier_logs(self) -> None:  # noqa: B027 - a bound host directory needs nothing
        """Bring the reward files the tests wrote into `verifier_logs` (regular files only)."""

    def close(self) -> None:  # noqa: B027 - rooms without resources need nothing
        """Release what the room holds (a container)."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class AgentPhase(CommandViews):
    """A room's agent phase as an `metaeval.sandbox.environment.Environment`: commands run
    in /app under the phase's limits (time capped further by `timeout_s`), files are /app's
    (the file tools' views run as commands there: `CommandViews`). `on_command` is called
    with each command run through `exec` and its result (for the trial log)."""

    def __init__(
        self, room: Room, *, solution: bool = False, on_command: OnCommand | None = None
    ) -> None:
        self.room = room
        self.show = ("solution",) if solution else ()
        self.solution_env = room.limits.solution_env.values if solution else {}
        self.on_command = on_command

    def exec(
        self, command: str, *, timeout_s: float = 60, env: Mapping[str, str] | None = None
    ) -> ExecResult:
        variables = {**self.solution_env, **(env or {})}
        ran = self.room.exec(
            command, "agent", timeout_s=timeout_s, show=self.show, env=variables or None
        )
        if self.on_command is not None:
            self.on_command(command, ran)
        return ran

    def read_file(self, path: str) -> bytes:
        return self.room.read_file(path)

    def write_file(self, path: str, data: bytes) -> str:
        return self.room.write_file(path, data)

    def list_files(self) -> list[str]:
        """Run by the harness, not the agent: `on_command` does not hear of it."""
        found = self.room.exec(LIST_FILES, "agent", timeout_s=60)
        return sorted(found.stdout.splitlines()) if found.returncode == 0 else []

    def close(self) -> None:
        """Nothing: the room closes with its trial."""


LIST_FILES = "find . -mindepth 1 ! -type d -printf '%P\\n'"
"""Every entry under /app but directories, relative (as `Workspace.list_files` counts)."""


RoomT = TypeVar("RoomT", bound=Room)


class Backend(abc.ABC, Generic[RoomT]):
    """Where trials run: opens a fresh room (of type RoomT) per trial."""

    @property
    @abc.abstractmethod
    def description(self) -> str:
        """For reports: "bubblewrap", "podman 4.3.1"."""

    @abc.abstractmethod
    def open(self, task_root: Path, scratch: Path, limits: TrialLimits) -> RoomT:
        """A fresh room for one trial of the task at `task_root`; host files go to `scratch`."""


class TrialHooks:
    """Steps a caller adds to a trial, run in its room: before and after the solve step, and
    after the tests' reward was read (each does nothing unless overridden)."""

    def before_solve(self, room: Room) -> None:
        """Before the solve step (only when there is one)."""

    def after_solve(self, room: Room) -> None:
        """After the solve step, before the tests."""

    def after_test(self, room: Room, result: TrialResult) -> None:
        """After the tests ran and `result` holds their reward, before the room closes."""


class TrialResult(BaseModel):
    """What a trial did and scored."""

    backend: str
    solve: ExecResult | None = None  # the agent phase's last command (the oracle's solve.sh)
    test: ExecResult | None = None
    reward: float | None = None
    reward_source: str | None = None  # "reward.txt" or "reward.json"
    reward_error: str | None = None
    notes: list[str] = Field(default_factory=list)  # on task.toml's env tables, names only
    log: str = ""
    reports: dict[str, str] = Field(default_factory=dict)  # per-test reports the tests wrote

    @property
    def sandbox_error(self) -> str | None:
        """Why a phase's sandbox never started (infrastructure: the trial says nothing
        about the task), or None."""
        phases = (self.solve, self.test)
        return next((p.sandbox_error for p in phases if p is not None and p.sandbox_error), None)

    @property
    def passed(self) -> bool:
        """True when the tests ran and reported a reward of at least 1."""
        return self.reward is not None and self.reward >= 1


def run_trial(
    task_root: Path,
    backend: Backend[RoomT],
    *,
    limits: TrialLimits,
    scratch: Path,
    agent: PhaseAgent | None = None,
    solve: Callable[[RoomT], object] | None = None,
    cap: Callable[[str], str] | None = None,
    hooks: TrialHooks | None = None,
) -> TrialResult:
    """Run one trial of the Harbor task at `task_root` and return its reward and log.

    The agent phase runs `agent` in the room's `agent_env`, or `solve` with the room itself
    (a caller that needs the room's host directories), or nothing. `scratch` (an existing,
    empty host directory) receives the trial's files; the caller removes it. Exceptions of
    the agent phase propagate (the tests do not run); `cap` shortens the log's output;
    `hooks` add steps around the phases.
    """
    hooks = hooks if hooks is not None else TrialHooks()
    result = TrialResult(backend=backend.description)
    shown = agent is not None and agent.sees_solution
    result.notes = [
        *limits.environment_env.notes,
        *(limits.solution_env.notes if shown else ()),
        *limits.verifier_env.notes,
    ]
    with backend.open(Path(task_root), Path(scratch), limits) as room:
        parts = [room.header] if room.header else []
        parts += [f"/app: left out {note}" for note in room.notes]
        parts += [f"task.toml: {note}" for note in result.notes]
        if agent is not None or solve is not None:
            hooks.before_solve(room)
        if agent is not None:

            def logged(command: str, ran: ExecResult) -> None:
                parts.append(ran.describe(command, cap=cap))
                result.solve = ran

            phase = room.agent_env(solution=shown, on_command=logged)
            agent.solve(phase, Path(task_root), limits.agent.timeout_s)
        elif solve is not None:
            solve(room)
        if agent is not None or solve is not None:
            hooks.after_solve(room)
        result.test = room.test()
        parts.append(result.test.describe(TEST_COMMAND, cap=cap))
        reward, source, error = read_reward(room.verifier_logs)
        result.reports = read_reports(room.verifier_logs)
        if result.test.limit_exceeded is not None:  # the tests broke a limit: no score
            reward, source, error = None, None, f"the tests {result.test.limit_exceeded}"
        result.reward, result.reward_source, result.reward_error = reward, source, error
        hooks.after_test(room, result)
    if source is not None and reward is not None:
        parts.append(f"reward: {reward:g} (from /logs/verifier/{source})")
    else:
        parts.append(f"reward: none ({error})")
    result.log = "\n".join(parts) + "\n"
    return result
