"""What the execution checks of one task did: each trial's outcome and the task's result."""

from __future__ import annotations

import re

from pydantic import BaseModel, Field

from metaeval.protocols.audit.findings import Finding
from metaeval.sandbox.process import ExecResult
from metaeval.tasks.verifier_cases import CaseOutcomes

ORACLE_LOG = "logs/oracle.log"


NULL_AGENT_LOG = "logs/null_agent.log"


class PhaseOutcome(BaseModel):
    """One run (oracle or null agent) of a task."""

    name: str  # "oracle" or "null_agent"
    ran: bool = False
    note: str = ""  # why it did not run, or a remark about the reward
    reward: float | None = None
    reward_source: str | None = None  # "reward.txt" or "reward.json"
    reward_error: str | None = None
    notes: list[str] = Field(default_factory=list)  # on task.toml's env tables (names only)
    solve: ExecResult | None = None
    test: ExecResult | None = None
    log: str = ""
    log_name: str = ""
    cases: CaseOutcomes | None = None  # which tests passed, when the verifier's output says
    cases_note: str = ""  # why there are no per-test outcomes

    @property
    def passed(self) -> bool:
        """True when the run finished with a reward of at least 1."""
        return self.ran and self.reward is not None and self.reward >= 1

    @property
    def timed_out(self) -> bool:
        return any(r is not None and r.timed_out for r in (self.solve, self.test))


class ExecutionCheckResult(BaseModel):
    """Findings of the execution checks of one task, with the runs behind them."""

    task_id: str
    findings: list[Finding] = Field(default_factory=list)
    skipped: str | None = None
    backend: str = ""  # "podman 4.3.1", "docker 27.0", "bubblewrap"
    approximate: bool = False  # bubblewrap or a stand-in image playing the task's image
    stand_in: list[str] = Field(default_factory=list)  # base images played by local stand-ins
    mismatch: str | None = None  # a failure the real environment would not have
    build_log: str = ""
    image_id: str | None = None  # the image both phases ran (containers only)
    infra_error: bool = False  # a sandbox did not start: retried on resume, says nothing
    oracle: PhaseOutcome = Field(default_factory=lambda: PhaseOutcome(name="oracle"))
    null_agent: PhaseOutcome = Field(default_factory=lambda: PhaseOutcome(name="null_agent"))
    # the oracle's tests rerun without the files the oracle created (`oracle_outputs`)
    outputs_removed: PhaseOutcome | None = None
    removed_files: list[str] = Field(default_factory=list)  # absolute paths in the room
    oracle_other_changes: list[str] = Field(default_factory=list)  # "changed /app/x", ...

    @property
    def logs(self) -> dict[str, str]:
        """Log texts by name (e.g. "logs/oracle.log"), for storing as blobs."""
        phases = (self.oracle, self.null_agent, self.outputs_removed)
        return {o.log_name: o.log for o in phases if o is not None and o.ran and o.log_name}

    @property
    def faithful_logs(self) -> dict[str, str]:
        """The logs of runs in the task's own environment (none from an approximation):
        what may show an absence claim (`dedupe.merge_check_findings`)."""
        return {} if self.approximate else self.logs


_UNAVAILABLE = re.compile(r"\bimage (\S+) is not available here\b")


def unavailable_reason(engine: str, image: str) -> str:
    """The skip reason of a task whose image (or base image) this machine does not have."""
    return f"{engine}: image {image} is not available here (not present locally, not pulled)"


def unavailable_image(skip_reason: str | None) -> str | None:
    """The image an `unavailable_reason` names, or None for any other skip reason."""
    match = _UNAVAILABLE.search(skip_reason or "")
    return match.group(1) if match else None


_PULL_FAILED = re.compile(r"\bimage (\S+) could not be pulled: (.*)$")


def pull_failed_reason(engine: str, image: str, error: str) -> str:
    """The skip reason of a task whose image (or base image) `--pull` could not fetch."""
    return f"{engine}: image {image} could not be pulled: {error}"


NO_ENGINE = "no container engine:"  # how `sandbox.container.find_engine` says there is none
SHOWN_IMAGES = 5  # images named in the one summary line; the rest are counted


def execution_lines(outcomes: list[tuple[bool, str]]) -> list[str]:
    """What the execution checks did, said once: `outcomes` holds (ran, skip reason) per task.
    Tasks skipped because their image is not here make one line naming the images, tasks
    whose image `--pull` could not fetch one line naming each image and its error, tasks
    without a working engine one line with its reason; other reasons one line each with their
    task count."""
    unavailable: dict[str, int] = {}
    not_pulled: dict[str, tuple[int, str]] = {}  # image: (tasks, the pull's error)
    no_engine: dict[str, int] = {}
    others: dict[str, int] = {}
    for ran, reason in outcomes:
        if ran or not reason.strip():
            continue
        image = unavailable_image(reason)
        pull = _PULL_FAILED.search(reason.strip())
        if image is not None:
            unavailable[image] = unavailable.get(image, 0) + 1
        elif pull is not None:
            count = not_pulled.get(pull.group(1), (0, ""))[0]
            not_pulled[pull.group(1)] = (count + 1, pull.group(2))
        elif reason.startswith(NO_ENGINE):
            no_engine[reason.strip()] = no_engine.get(reason.strip(), 0) + 1
        else:
            others[reason.strip()] = others.get(reason.strip(), 0) + 1
    lines = []
    could_run = sum(1 for did, _ in outcomes if did)
    for reason, count in no_engine.items():
        lines.append(
            f"{could_run} of {len(outcomes)} tasks could run: {count} need a container engine "
            f"and none works here ({reason.removeprefix(NO_ENGINE).strip()}); "
            "`--no-execution` skips this step"
        )
    if unavailable:
        shown = ", ".join(list(unavailable)[:SHOWN_IMAGES])
        more = len(unavailable) - SHOWN_IMAGES
        lines.append(
            f"{could_run} of {len(outcomes)} tasks could run: {sum(unavailable.values())} need an image "
            f"that is not available here ({shown}{f' and {more} more' if more > 0 else ''}); "
            "`--no-execution` skips this step"
        )
    if not_pulled:
        shown = "; ".join(f"{i}: {e}" for i, (_, e) in list(not_pulled.items())[:SHOWN_IMAGES])
        more = len(not_pulled) - SHOWN_IMAGES
        lines.append(
            f"{could_run} of {len(outcomes)} tasks could run: "
            f"{sum(n for n, _ in not_pulled.values())} need an image that could not be pulled "
            f"({shown}{f'; and {more} more' if more > 0 else ''}); "
            "`--no-execution` skips this step"
        )
    for reason, count in others.items():
        lines.append(f"{reason} ({count} task{'s' if count != 1 else ''})")
    return lines
