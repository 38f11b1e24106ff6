"""Evaluate a target agent on Harbor tasks through the PACT episode interface.

One task, one episode (`evaluate_task`), run as a Harbor trial
(`metaeval.tasks.trial.run_trial`, limits from task.toml through `metaeval.tasks.limits`) in
bubblewrap or, with `sandbox` auto/docker/podman, in a container of the task's own image
(`metaeval.protocols.improve.episode_room`):

1. A fresh /app: in bubblewrap a work directory seeded from the task's `environment/`
   (Docker build files left out), in a container the image's own.
2. `client.reset(ResetRequest)` starts the episode with the task's instruction.md; the first
   observation is `initial`.
3. Up to `max_steps` times: `client.act(ActRequest(observation))` returns an action.
   - command: run with bash in the trial's agent phase (the agent never sees /tests or
     /solution; network off whatever task.toml says; the task's memory limit; a scratch
     directory, not the verifier's, at /logs/verifier), capped at `command_timeout_s` and
     at the time the episode has left;
     observation `command_result` (stdout/stderr capped, exit code, timed_out);
   - write_file: written under /app (on the host in bubblewrap, inside a container as the
     image's user); the path is `/app/<rel>` or `<rel>`; a path leaving /app (absolute
     elsewhere, `..`, or in bubblewrap through a symlink) is refused with an `error`
     observation and nothing is written; otherwise `file_written`;
   - submit: the episode ends.
4. Whether the agent submitted, ran out of steps or ran out of time, the task's tests run
   (`bash /tests/test.sh` in the trial's verifier phase: /tests visible, the task's verifier
   network setting and memory limit) on the work directory, and the reward is read from
   /logs/verifier: reward >= 1 is `passed`, any other reward, no reward, or a verifier that
   timed out is `failed`.

Statuses and the paper's failure classes (Section 3.6):

- passed / failed: the candidate was executed and scored (a task failure, E.2).
- target_error: a target-agent failure. The client raised (the candidate cannot launch or
  serve, died mid-episode, or returned a malformed action), refused the reset, or did not
  answer the reset within the episode time limit. The episode stops at once and no tests run.
- infra_error: an evaluation-framework failure. The sandbox is unavailable or broke, the
  task is incomplete (no instruction.md or tests/test.sh), or the harness itself raised.
  The client is not contacted when this is known up front.

An agent that is merely slow is not a target error: when the episode time limit
(`task_timeout_s`, counted from the start of the episode, reset included) passes while the
harness waits for an action, the episode ends and the tests still run. Client calls run on a
daemon thread the harness stops waiting for at the deadline, so a hung client can never hang
the evaluation; a call still running then is abandoned. The verifier has its own time limit
(`verifier_timeout_s`, default the task's `[verifier] timeout_sec`, else Harbor's 600 s), so
a task takes at most about task_timeout_s + verifier_timeout_s.

Why a verifier timeout or a missing reward counts as `failed`, not infra_error: the agent
shapes the /app the tests read (a FIFO, a huge file), so classifying those as infrastructure
would let a candidate turn failures into exclusions and raise its score. Only signals the
agent cannot produce (the sandbox reporting itself unavailable, a harness exception) are
infra errors.

Suites are scored in `metaeval.protocols.improve.suite_eval`.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field, ValidationError

from metaeval.protocols.improve.episode_room import (
    DEFAULT_SANDBOX,
    Refused,
    RoomUnavailable,
    check_sandbox,
    choose_backend,
    write_in_room,
)
from metaeval.protocols.improve.pact.protocol import (
    ActRequest,
    ActResponse,
    CommandAction,
    Observation,
    ResetRequest,
    SubmitAction,
    WriteFileAction,
)
from metaeval.sandbox.process import ExecResult
from metaeval.tasks.limits import TrialLimits, trial_limits
from metaeval.tasks.safe_files import read_regular, remove_tree
from metaeval.tasks.task_dirs import parse_task_toml
from metaeval.tasks.trial import Room, TrialResult, run_trial

TaskStatus = Literal["passed", "failed", "infra_error", "target_error"]

DEFAULT_MAX_STEPS = 30
DEFAULT_TASK_TIMEOUT_S = 600.0
DEFAULT_COMMAND_TIMEOUT_S = 60.0
MAX_OBSERVATION_CHARS = 8000
"""Per stream (stdout, stderr) in a command_result observation: head and tail are kept."""
MAX_WRITE_BYTES = 8 * 1024 * 1024
MAX_INSTRUCTION_BYTES = 1024 * 1024


class EpisodeClient(Protocol):
    """What the evaluator needs from a target agent (PactClient satisfies it)."""

    def reset(self, request: ResetRequest) -> Any: ...

    def act(self, request: ActRequest) -> ActResponse: ...


class TaskOutcome(BaseModel):
    """The result of one episode on one task."""

    task_id: str
    status: TaskStatus
    reward: float | None = None
    steps: int = 0  # actions received from the agent
    submitted: bool = False
    answer: str = ""  # the submit action's answer
    reason: str = ""
    trace: list[dict[str, Any]] = Field(default_factory=list)
    test_log: str = ""
    usage: dict[str, int] = Field(default_factory=dict)  # summed over steps
    duration_s: float = 0.0
    backend: str = ""  # where the trial ran: "bubblewrap", "podman 4.9.3 (image ...)"

    @property
    def scored(self) -> bool:
        """True when the outcome counts toward accuracy (passed or failed)."""
        return self.status in ("passed", "failed")


_TASK_ID_SALT = os.urandom(16)


def opaque_task_id(name: str) -> str:
    """The id a target is told for a task: stable within one process, meaningless outside it,
    so a candidate cannot look the task's answers up by name."""
    import hashlib

    return "task-" + hashlib.sha256(_TASK_ID_SALT + name.encode()).hexdigest()[:12]


class _Stop(Exception):
    """Ends an episode with a status other than a scored one."""

    def __init__(self, status: TaskStatus, reason: str):
        super().__init__(reason)
        self.status = status
        self.reason = reason


# --------------------------------------------------------------------------- one task


def evaluate_task(
    task_dir: Path,
    client: EpisodeClient,
    *,
    max_steps: int = DEFAULT_MAX_STEPS,
    task_timeout_s: float = DEFAULT_TASK_TIMEOUT_S,
    command_timeout_s: float = DEFAULT_COMMAND_TIMEOUT_S,
    work_root: Path | None = None,
    verifier_timeout_s: float | None = None,
    episode_id: str | None = None,
    keep_work: bool = False,
    host_env: Sequence[str] = (),
    sandbox: str = DEFAULT_SANDBOX,
) -> TaskOutcome:
    """Run one episode of `client` on the Harbor task at `task_dir`, then its tests.

    `host_env` names the host variables task.toml's env tables may read as `${NAME}`
    (`metaeval.tasks.limits`); no other host variable reaches the episode or its tests.
    `sandbox` picks where the trial runs (`metaeval.protocols.improve.episode_room`).

    Raises ValueError for non-positive limits; otherwise never raises: every problem becomes a status with
    a reason (see the module docstring). `work_root` holds the episode's scratch directory
    (default: a new temporary directory), removed afterwards unless `keep_work`.
    """
    if max_steps < 1 or task_timeout_s <= 0 or command_timeout_s <= 0:
        raise ValueError("max_steps, task_timeout_s and command_timeout_s must be positive")
    check_sandbox(sandbox)
    started = time.monotonic()
    root = Path(task_dir).resolve()
    outcome = TaskOutcome(task_id=root.name, status="infra_error")
    scratch: Path | None = None
    try:
        base = Path(work_root) if work_root is not None else Path(tempfile.gettempdir())
        base.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=f"{_safe(root.name)}-", dir=base))
        _Episode(
            root=root,
            client=client,
            outcome=outcome,
            scratch=scratch,
            started=started,
            max_steps=max_steps,
            task_timeout_s=task_timeout_s,
            command_timeout_s=command_timeout_s,
            verifier_timeout_s=verifier_timeout_s,
            episode_id=episode_id or f"episode-{uuid.uuid4().hex[:16]}",
            host_env=tuple(host_env),
            sandbox=sandbox,
        ).run()
    except _Stop as stop:
        outcome.status = stop.status
        outcome.reason = stop.reason
    except Exception as exc:  # the harness itself failed: an evaluation-framework failure
        outcome.status = "infra_error"
        outcome.reason = f"evaluation harness error: {type(exc).__name__}: {exc}"
    finally:
        if scratch is not None and not keep_work:
            remove_tree(scratch)  # iterative: the agent may nest directories arbitrarily deep
        outcome.duration_s = round(time.monotonic() - started, 3)
    return outcome


class _Episode:
    def __init__(
        self,
        *,
        root: Path,
        client: EpisodeClient,
        outcome: TaskOutcome,
        scratch: Path,
        started: float,
        max_steps: int,
        task_timeout_s: float,
        command_timeout_s: float,
        verifier_timeout_s: float | None,
        episode_id: str,
        host_env: tuple[str, ...] = (),
        sandbox: str = DEFAULT_SANDBOX,
    ) -> None:
        self.root = root
        self.host_env = host_env
        self.sandbox = sandbox
        self.client = client
        self.outcome = outcome
        self.deadline = started + task_timeout_s
        self.task_timeout_s = task_timeout_s
        self.max_steps = max_steps
        self.command_timeout_s = command_timeout_s
        self.verifier_timeout_s = verifier_timeout_s
        self.episode_id = episode_id
        self.scratch = scratch
        self.config: dict[str, Any] = {}
        self.room: Room | None = None
        self.ending = ""

    # ---------------------------------------------------------------- phases

    def run(self) -> None:
        instruction = self._prepare()
        try:
            backend = choose_backend(self.root, self.config, self.sandbox)
        except RoomUnavailable as exc:
            raise _Stop("infra_error", str(exc)) from exc

        def episode(room: Room) -> None:
            self.room = room
            self._reset(instruction)
            self.ending = self._loop()

        limits = self._limits()
        image = getattr(backend, "image", None)
        self.outcome.backend = backend.description + (f" (image {image})" if image else "")
        trial = run_trial(
            self.root,
            backend,
            limits=limits,
            scratch=self.scratch,
            solve=episode,
            cap=_cap,
        )
        self._score(trial, limits)

    def _prepare(self) -> str:
        missing = [
            rel for rel in ("instruction.md", "tests/test.sh") if not (self.root / rel).is_file()
        ]
        if missing:
            raise _Stop("infra_error", f"task is incomplete: no {', '.join(missing)}")
        toml_path = self.root / "task.toml"
        if toml_path.is_file():
            self.config, error = parse_task_toml(toml_path, self.root)
            if error is not None:
                raise _Stop("infra_error", f"task.toml does not parse: {error}")
        try:
            instruction = read_regular(
                self.root / "instruction.md", self.root, max_bytes=MAX_INSTRUCTION_BYTES
            ).decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise _Stop("infra_error", f"instruction.md cannot be read: {exc}") from exc
        return instruction

    def _reset(self, instruction: str) -> None:
        request = ResetRequest(
            episode_id=self.episode_id,
            task_id=opaque_task_id(self.outcome.task_id),
            instruction=instruction,
            max_steps=self.max_steps,
        )
        done, value, error = _call_with_deadline(self.client.reset, request, self._left())
        if not done:
            raise _Stop(
                "target_error",
                f"reset did not answer within the episode time limit ({self.task_timeout_s:g} s)",
            )
        if error is not None:
            raise _Stop("target_error", f"reset failed: {describe_error(error)}")
        ok = value.get("ok", True) if isinstance(value, dict) else getattr(value, "ok", True)
        if ok is False:
            raise _Stop("target_error", "reset was refused (ok: false)")

    def _loop(self) -> str:
        """Run the steps; returns how the episode ended (for the reason)."""
        observation = Observation(kind="initial", step=0)
        last_action: Any = None
        for step in range(1, self.max_steps + 1):
            left = self._left()
            if left <= 0:
                return self._ended_by_time(observation, last_action)
            request = ActRequest(episode_id=self.episode_id, observation=observation)
            done, value, error = _call_with_deadline(self.client.act, request, left)
            if not done:
                return self._ended_by_time(observation, last_action)
            if error is not None:
                raise _Stop("target_error", f"act failed at step {step}: {describe_error(error)}")
            response = _as_act_response(value, step)
            action = response.action
            self.outcome.steps = step
            for key, count in response.usage.items():
                self.outcome.usage[key] = self.outcome.usage.get(key, 0) + int(count)
            self.outcome.trace.append(
                {
                    "step": step,
                    "observation": observation.model_dump(),
                    "action": action.model_dump(),
                    "usage": dict(response.usage),
                }
            )
            last_action = action
            if isinstance(action, SubmitAction):
                self.outcome.submitted = True
                self.outcome.answer = action.answer
                return "submitted"
            if isinstance(action, CommandAction):
                observation = self._command(action, step)
            elif isinstance(action, WriteFileAction):
                observation = self._write_file(action, step)
            else:  # pragma: no cover - the Action union has no other member
                raise _Stop("target_error", f"unknown action at step {step}: {action!r}")
        self._trace_result(observation)
        return f"step limit ({self.max_steps}) reached without submit"

    def _ended_by_time(self, observation: Observation, last_action: Any) -> str:
        if last_action is not None:
            self._trace_result(observation)
        return f"episode time limit ({self.task_timeout_s:g} s) reached without submit"

    def _trace_result(self, observation: Observation) -> None:
        """Record the result of the last action, which the agent never saw."""
        self.outcome.trace.append(
            {"step": observation.step, "observation": observation.model_dump(), "action": None}
        )

    def _score(self, trial: TrialResult, limits: TrialLimits) -> None:
        """The tests' verdict: passed on a reward of at least 1, failed otherwise."""
        result = trial.test
        assert result is not None  # run_trial always runs the tests
        self.outcome.test_log = trial.log
        if _sandbox_broke(result):
            raise _Stop("infra_error", f"the verifier could not run: {result.stderr.strip()}")
        self.outcome.reward = trial.reward
        self.outcome.status = "passed" if trial.passed else "failed"
        if result.timed_out:
            verdict = f"the verifier timed out after {limits.verifier.timeout_s:g} s"
        elif trial.reward is None:
            verdict = f"no reward: {trial.reward_error}"
        else:
            verdict = f"reward {trial.reward:g}"
        self.outcome.reason = f"{self.ending}; {verdict}"

    # ---------------------------------------------------------------- actions

    def _command(self, action: CommandAction, step: int) -> Observation:
        limit = self.command_timeout_s
        if action.timeout_s is not None and action.timeout_s > 0:
            limit = min(limit, action.timeout_s)
        limit = min(limit, self._left())
        if limit <= 0:
            return Observation(
                kind="error", step=step, message="no time left in the episode to run a command"
            )
        assert self.room is not None
        result = self.room.exec(action.command, "agent", timeout_s=limit)
        if _sandbox_broke(result):
            raise _Stop("infra_error", f"sandbox failed at step {step}: {result.stderr.strip()}")
        return Observation(
            kind="command_result",
            step=step,
            stdout=_cap(result.stdout),
            stderr=_cap(result.stderr),
            exit_code=result.returncode,
            timed_out=result.timed_out,
            message=f"command timed out after {limit:g} s" if result.timed_out else "",
        )

    def _write_file(self, action: WriteFileAction, step: int) -> Observation:
        data = action.content.encode("utf-8")
        if len(data) > MAX_WRITE_BYTES:
            return Observation(
                kind="error",
                step=step,
                message=f"refused: content is {len(data)} bytes (limit {MAX_WRITE_BYTES})",
            )
        try:
            assert self.room is not None
            limit = min(self.command_timeout_s, max(self._left(), 1.0))
            shown = write_in_room(self.room, action.path, data, limit)
        except Refused as exc:
            return Observation(kind="error", step=step, message=f"refused: {exc}")
        except OSError as exc:
            return Observation(kind="error", step=step, message=f"cannot write: {exc.strerror}")
        return Observation(
            kind="file_written", step=step, message=f"wrote {len(data)} bytes to {shown}"
        )

    # ---------------------------------------------------------------- settings

    def _left(self) -> float:
        return self.deadline - time.monotonic()

    def _limits(self) -> TrialLimits:
        """task.toml's limits; the agent phase gets the episode's time limit and, whatever
        task.toml says, no network (a candidate never reaches the host's services)."""
        limits = trial_limits(
            self.config,
            agent_timeout_s=self.task_timeout_s,
            verifier_timeout_s=self.verifier_timeout_s,
            host_env=self.host_env,
        )
        return dataclasses.replace(limits, agent=dataclasses.replace(limits.agent, network=False))


# --------------------------------------------------------------------------- helpers


def _call_with_deadline(
    fn: Callable[[Any], Any], request: Any, timeout_s: float
) -> tuple[bool, Any, BaseException | None]:
    """(finished, value, error) of fn(request), waiting at most `timeout_s`.

    The call runs on a daemon thread; when it does not finish in time it is abandoned (its
    late result is dropped) and `finished` is False.
    """
    box: dict[str, Any] = {}
    finished = threading.Event()

    def target() -> None:
        try:
            box["value"] = fn(request)
        except BaseException as exc:  # every client failure is reported, whatever its type
            box["error"] = exc
        finally:
            finished.set()

    if timeout_s <= 0:
        return False, None, None
    threading.Thread(target=target, name="metaeval-episode-call", daemon=True).start()
    if not finished.wait(timeout_s):
        return False, None, None
    return True, box.get("value"), box.get("error")


def _as_act_response(value: Any, step: int) -> ActResponse:
    if isinstance(value, ActResponse):
        return value
    try:
        if isinstance(value, BaseModel):
            value = value.model_dump()
        return ActResponse.model_validate(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise _Stop(
            "target_error",
            f"act returned a malformed response at step {step}: {where}: {first.get('msg')}",
        ) from exc


def describe_error(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _sandbox_broke(result: ExecResult) -> bool:
    """True only on signals the agent cannot fake: the sandbox reported itself unavailable,
    or the process could not be reaped."""
    return not result.sandboxed or (result.returncode is None and not result.timed_out)


def _cap(text: str, limit: int = MAX_OBSERVATION_CHARS) -> str:
    if len(text) <= limit:
        return text
    head = limit - limit // 2
    tail = limit // 2
    omitted = len(text) - head - tail
    return f"{text[:head]}\n[... {omitted} characters omitted ...]\n{text[-tail:]}"


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in name)[:60] or "task"
