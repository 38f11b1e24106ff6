"""Evaluate a target agent on Harbor tasks through the PACT episode interface.

One task, one episode (`evaluate_task`), run as a Harbor trial
(`metaeval.tasks.trial.run_trial`, limits from task.toml through `metaeval.tasks.limits`) in
bubblewrap or, with `sandbox` auto/docker/podman, in a container of the task's own image
(`metaeval.protocols.improve.episode_room`):

1. A fresh /app: in bubblewrap a work directory seeded from the task's `environment/`
   (Docker build files left out), in a container the image's own.
2. `client.reset(ResetRequest)` starts the episode with the task's instruction.md; the first
   observation is `initial`.
3. Up to `limits.max_steps` times: `client.act(ActRequest(observation))` returns an action.
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

The episode itself is `metaeval.protocols.improve.episode`; suites are scored in
`metaeval.protocols.improve.suite_eval`.
"""

from __future__ import annotations

import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

from metaeval.protocols.improve.episode import Episode, EpisodeStop
from metaeval.protocols.improve.episode_limits import EpisodeLimits
from metaeval.protocols.improve.episode_room import DEFAULT_SANDBOX, check_sandbox
from metaeval.protocols.improve.image_pins import ImagePins
from metaeval.protocols.improve.task_outcome import EpisodeClient, TaskOutcome
from metaeval.tasks.safe_files import remove_tree


def evaluate_task(
    task_dir: Path,
    client: EpisodeClient,
    *,
    limits: EpisodeLimits | None = None,
    work_root: Path | None = None,
    episode_id: str | None = None,
    keep_work: bool = False,
    host_env: Sequence[str] = (),
    sandbox: str = DEFAULT_SANDBOX,
    pins: ImagePins | None = None,
) -> TaskOutcome:
    """Run one episode of `client` on the Harbor task at `task_dir`, then its tests.

    `host_env` names the host variables task.toml's env tables may read as `${NAME}`
    (`metaeval.tasks.limits`); no other host variable reaches the episode or its tests.
    `sandbox` picks where the trial runs (`metaeval.protocols.improve.episode_room`);
    a container runs the image id `pins` holds for the task (resolved now when None).

    `limits` bounds the episode (`EpisodeLimits`; its defaults when None, and building one
    with a non-positive bound raises ValueError). Never raises otherwise: every problem
    becomes a status with a reason (see the module docstring). `work_root` holds the
    episode's scratch directory (default: a new temporary directory), removed afterwards
    unless `keep_work`.
    """
    check_sandbox(sandbox)
    started = time.monotonic()
    root = Path(task_dir).resolve()
    outcome = TaskOutcome(task_id=root.name, status="infra_error")
    scratch: Path | None = None
    try:
        base = Path(work_root) if work_root is not None else Path(tempfile.gettempdir())
        base.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=f"{_safe(root.name)}-", dir=base))
        Episode(
            root=root,
            client=client,
            outcome=outcome,
            scratch=scratch,
            started=started,
            limits=limits or EpisodeLimits(),
            episode_id=episode_id or f"episode-{uuid.uuid4().hex[:16]}",
            host_env=tuple(host_env),
            sandbox=sandbox,
            pins=pins,
        ).run()
    except EpisodeStop as stop:
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


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in name)[:60] or "task"
