"""A meta-agent lane launched from the SUT config's `launch_profile` (AIE Bench C.1).

The paper launches every evaluation-facing system, meta-agent lanes included, from a system
profile: a PACT server the benchmark starts and drives. With `meta_agent.agent: "pact"` the
SUT config's `launch_profile` is that server. For each trial the harness launches it (the
profile's command and env; working directory the optimizer worktree, read-only to the
server; no network; metaeval's source and the running Python visible, nothing else of the
host), resets it with the trial's instruction (`optimizer_instruction.md`), and plays its
actions in the worktree up to the SUT config's `max_steps`:

- command: run with bash in the worktree in metaeval's sandbox (the worktree writable, the
  rest of the host read-only, no network), capped at the time the trial has left;
- write_file: written inside the worktree (a path leaving it is refused with an error
  observation);
- submit: the proposal ends; its answer is the summary.

Its server log is kept in the trial's trace (its last lines). A server that cannot start,
or fails mid-trial, is a meta-agent error; it gets at most the trial's time limit to become
healthy (the profile's `startup_timeout_s` when shorter), and is stopped (its process group
killed, its socket directory removed) whatever ends the trial. Other lanes ignore no profile: the SUT config
refuses a `launch_profile` for any lane but this one (`config.resolve_manifest`).
"""

from __future__ import annotations

import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from metaeval.agents.types import Limits
from metaeval.protocols.improve.pact.launcher import LaunchError, launch
from metaeval.protocols.improve.pact.protocol import (
    ActRequest,
    CommandAction,
    Observation,
    ResetRequest,
    SubmitAction,
    WriteFileAction,
)
from metaeval.protocols.improve.profiles import SystemProfile
from metaeval.protocols.improve.records import MetaOutput
from metaeval.records.redact import redact_text
from metaeval.sandbox.workspace import Workspace, WorkspaceError

OUTPUT_CHARS = 8000
SRC_DIR = Path(__file__).resolve().parents[4]  # .../src, where this metaeval is
LOG_TAIL_LINES = 20


class PactMetaAgent:
    """The `pact` lane: a PACT server from the launch profile proposes edits (`edit/1`)."""

    contract = "edit/1"

    def __init__(self, profile: SystemProfile):
        self.profile = profile
        self.name = f"pact:{profile.name}"

    def propose(self, contract_input: dict[str, Any], worktree: Path, limits: Limits) -> MetaOutput:
        from metaeval.protocols.improve.target_runtime import target_sandbox

        deadline = time.monotonic() + limits.time_limit_s
        instruction = (worktree / ".aie_bench_recursive" / "optimizer_instruction.md").read_text()
        with tempfile.TemporaryDirectory(prefix="meta-pact-") as logs:
            log_path = Path(logs) / "server.log"
            output = MetaOutput(status="ok", parent=contract_input["parent"]["id"])
            # its startup may take no longer than the trial may: a lane the harness gave up
            # on never waits out the profile's own (up to an hour) startup time
            startup = min(self.profile.startup_timeout_s, max(limits.time_limit_s, 1.0))
            try:
                server = launch(
                    self.profile.model_copy(update={"cwd": worktree, "startup_timeout_s": startup}),
                    log_path=log_path,
                    extra_env={"PYTHONPATH": str(SRC_DIR)},  # metaeval, as in the sandbox
                    sandbox=target_sandbox(worktree),
                )
            except LaunchError as exc:
                reason, *log = str(exc).splitlines()  # why, then the log's tail
                tail = "\n".join(log[-LOG_TAIL_LINES:])[-2000:]
                error = f"launch_profile server: {reason}" + (f"\n{tail}" if tail else "")
                return MetaOutput(status="error", error=error)
            try:
                client = server.client(timeout_s=max(limits.time_limit_s, 1.0))
                self._episode(client, instruction, worktree, limits, deadline, output)
            except Exception as exc:  # noqa: BLE001 - any failure of the lane is its own
                output.status, output.error = "error", f"{type(exc).__name__}: {exc}"[-3000:]
            finally:
                server.stop()
            text = redact_text(log_path.read_text(errors="replace"))
            lines = text.splitlines()[-LOG_TAIL_LINES:]
            output.trace.append({"type": "server_log_tail", "lines": lines})
        spent = sum(output.usage.values())
        output.cost_usd = 0.0 if not spent else None  # a lane's price is not known here
        return output

    def _episode(
        self,
        client: Any,
        instruction: str,
        worktree: Path,
        limits: Limits,
        deadline: float,
        output: MetaOutput,
    ) -> None:
        episode = f"meta-{uuid.uuid4().hex[:12]}"
        client.reset(
            ResetRequest(
                episode_id=episode,
                task_id=episode,
                instruction=instruction,
                max_steps=limits.max_steps,
            )
        )
        observation = Observation(kind="initial", step=0)
        for step in range(1, limits.max_steps + 1):
            if time.monotonic() >= deadline:
                output.status = "timeout"
                return
            response = client.act(ActRequest(episode_id=episode, observation=observation))
            for key, count in response.usage.items():
                output.usage[key] = output.usage.get(key, 0) + int(count)
            action = response.action
            output.trace.append({"type": "step", "step": step, "action": action.model_dump()})
            if isinstance(action, SubmitAction):
                output.summary = action.answer
                return
            observation = _play(action, step, Workspace(worktree), deadline)
            output.trace.append(
                {"type": "observation", "step": step, "observation": observation.model_dump()}
            )
        output.status, output.error = "timeout", f"step limit of {limits.max_steps} reached"


def _play(action: Any, step: int, workspace: Workspace, deadline: float) -> Observation:
    """Run one command or write one file in the worktree."""
    if isinstance(action, CommandAction):
        limit = max(0.1, deadline - time.monotonic())
        if action.timeout_s:
            limit = min(limit, action.timeout_s)
        result = workspace.exec(action.command, timeout_s=limit)
        return Observation(
            kind="command_result",
            step=step,
            stdout=result.stdout[-OUTPUT_CHARS:],
            stderr=result.stderr[-OUTPUT_CHARS:],
            exit_code=result.returncode,
            timed_out=result.timed_out,
        )
    if isinstance(action, WriteFileAction):
        try:
            workspace.write_text(action.path, action.content)
        except (WorkspaceError, OSError) as exc:
            return Observation(kind="error", step=step, message=f"refused: {exc}")
        return Observation(kind="file_written", step=step, message=f"wrote {action.path}")
    return Observation(kind="error", step=step, message=f"unknown action {action!r}")
