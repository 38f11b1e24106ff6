"""One episode of a target agent on one Harbor task, inside its trial: reset, the action
loop (command, write_file, submit) under the episode's deadline, then the tests' verdict.

`metaeval.protocols.improve.evaluate.evaluate_task` sets an episode up and turns an
`EpisodeStop` into the outcome's status; the rules are in that module's docstring.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from metaeval.protocols.improve.episode_limits import EpisodeLimits
from metaeval.protocols.improve.episode_room import (
    DEFAULT_SANDBOX,
    RoomUnavailable,
    choose_backend,
)
from metaeval.protocols.improve.image_pins import ImagePins
from metaeval.protocols.improve.pact.protocol import (
    ActRequest,
    ActResponse,
    CommandAction,
    Observation,
    ResetRequest,
    SubmitAction,
    WriteFileAction,
)
from metaeval.protocols.improve.task_outcome import (
    EpisodeClient,
    TaskOutcome,
    TaskStatus,
    describe_error,
    opaque_task_id,
)
from metaeval.sandbox.environment import Environment, WorkspaceError
from metaeval.sandbox.process import ExecResult
from metaeval.tasks.limits import TrialLimits, trial_limits
from metaeval.tasks.rooms import ContainerBackend
from metaeval.tasks.safe_files import read_regular
from metaeval.tasks.task_dirs import parse_task_toml
from metaeval.tasks.trial import Room, TrialResult, run_trial

MAX_OBSERVATION_CHARS = 8000
"""Per stream (stdout, stderr) in a command_result observation: head and tail are kept."""
MAX_WRITE_BYTES = 8 * 1024 * 1024
MAX_INSTRUCTION_BYTES = 1024 * 1024


class EpisodeStop(Exception):
    """Ends an episode with a status other than a scored one."""

    def __init__(self, status: TaskStatus, reason: str):
        super().__init__(reason)
        self.status = status
        self.reason = reason


class Episode:
    def __init__(
        self,
        *,
        root: Path,
        client: EpisodeClient,
        outcome: TaskOutcome,
        scratch: Path,
        started: float,
        limits: EpisodeLimits,
        episode_id: str,
        host_env: tuple[str, ...] = (),
        sandbox: str = DEFAULT_SANDBOX,
        pins: ImagePins | None = None,
    ) -> None:
        self.root = root
        self.pins = pins
        self.host_env = host_env
        self.sandbox = sandbox
        self.client = client
        self.outcome = outcome
        self.deadline = started + limits.task_timeout_s
        self.limits = limits
        self.episode_id = episode_id
        self.scratch = scratch
        self.config: dict[str, Any] = {}
        self.env: Environment | None = None  # the room's agent phase
        self.ending = ""

    # ---------------------------------------------------------------- phases

    def run(self) -> None:
        instruction = self._prepare()
        try:
            backend = choose_backend(self.root, self.config, self.sandbox, self.pins)
        except RoomUnavailable as exc:
            raise EpisodeStop("infra_error", str(exc)) from exc

        def episode(room: Room) -> None:
            self.env = room.agent_env()
            self._reset(instruction)
            self.ending = self._loop()

        limits = self._limits()
        shown = getattr(backend, "shown_image", None)
        self.outcome.backend = backend.description + (f" (image {shown})" if shown else "")
        if isinstance(backend, ContainerBackend) and backend.tag:  # the id the tag named
            self.outcome.image_id = backend.image
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
            raise EpisodeStop("infra_error", f"task is incomplete: no {', '.join(missing)}")
        toml_path = self.root / "task.toml"
        if toml_path.is_file():
            self.config, error = parse_task_toml(toml_path, self.root)
            if error is not None:
                raise EpisodeStop("infra_error", f"task.toml does not parse: {error}")
        try:
            instruction = read_regular(
                self.root / "instruction.md", self.root, max_bytes=MAX_INSTRUCTION_BYTES
            ).decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise EpisodeStop("infra_error", f"instruction.md cannot be read: {exc}") from exc
        return instruction

    def _reset(self, instruction: str) -> None:
        request = ResetRequest(
            episode_id=self.episode_id,
            task_id=opaque_task_id(self.outcome.task_id),
            instruction=instruction,
            max_steps=self.limits.max_steps,
        )
        done, value, error = _call_with_deadline(self.client.reset, request, self._left())
        if not done:
            raise EpisodeStop(
                "target_error",
                f"reset did not answer within the episode time limit ({self.limits.task_timeout_s:g} s)",
            )
        if error is not None:
            raise EpisodeStop("target_error", f"reset failed: {describe_error(error)}")
        ok = value.get("ok", True) if isinstance(value, dict) else getattr(value, "ok", True)
        if ok is False:
            raise EpisodeStop("target_error", "reset was refused (ok: false)")

    def _loop(self) -> str:
        """Run the steps; returns how the episode ended (for the reason)."""
        observation = Observation(kind="initial", step=0)
        last_action: Any = None
        for step in range(1, self.limits.max_steps + 1):
            left = self._left()
            if left <= 0:
                return self._ended_by_time(observation, last_action)
            request = ActRequest(episode_id=self.episode_id, observation=observation)
            done, value, error = _call_with_deadline(self.client.act, request, left)
            if not done:
                return self._ended_by_time(observation, last_action)
            if error is not None:
                raise EpisodeStop(
                    "target_error", f"act failed at step {step}: {describe_error(error)}"
                )
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
                raise EpisodeStop("target_error", f"unknown action at step {step}: {action!r}")
        self._trace_result(observation)
        return f"step limit ({self.limits.max_steps}) reached without submit"

    def _ended_by_time(self, observation: Observation, last_action: Any) -> str:
        if last_action is not None:
            self._trace_result(observation)
        return f"episode time limit ({self.limits.task_timeout_s:g} s) reached without submit"

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
            raise EpisodeStop("infra_error", f"the verifier could not run: {result.stderr.strip()}")
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
        limit = self.limits.command_timeout_s
        if action.timeout_s is not None and action.timeout_s > 0:
            limit = min(limit, action.timeout_s)
        limit = min(limit, self._left())
        if limit <= 0:
            return Observation(
                kind="error", step=step, message="no time left in the episode to run a command"
            )
        assert self.env is not None
        result = self.env.exec(action.command, timeout_s=limit)
        if _sandbox_broke(result):
            raise EpisodeStop(
                "infra_error", f"sandbox failed at step {step}: {result.stderr.strip()}"
            )
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
            assert self.env is not None
            shown = self.env.write_file(action.path, data)
        except WorkspaceError as exc:
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
            agent_timeout_s=self.limits.task_timeout_s,
            verifier_timeout_s=self.limits.verifier_timeout_s,
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
        raise EpisodeStop(
            "target_error",
            f"act returned a malformed response at step {step}: {where}: {first.get('msg')}",
        ) from exc


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
