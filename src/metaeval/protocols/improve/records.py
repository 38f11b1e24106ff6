"""The records an improve bundle holds, as typed models, and the files they go to.

Per trial (`trials/NNN/`): what the meta-agent returned (`MetaOutput`,
`optimizer_output.json`), the ledger entry (`trial_result.json`, and one line of
`trial_ledger.jsonl`), the selection decision (`selection_decision.json`), the feedback the
next trials see (`feedback_packet.json`) and the candidate's evaluation
(`artifacts/candidates/evaluation.json`); per run, the baseline's evaluation
(`baseline_evaluation.json`). The models declare every field the harness writes, in the
JSON it has always written (keys sorted, as `BundleFiles.json` and the ledger writer sort
them): `model_dump()` of a record built by the loop is byte-for-byte the dict it wrote.
Fields a bundle of an older metaeval may lack have defaults, and unknown fields are kept, so
an old bundle reads and re-renders as before.

Numbers keep their JSON type (`int | float`): a score of 1 written as `1` stays `1`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

LEDGER_NAME = "trial_ledger"
LEDGER = f"{LEDGER_NAME}.jsonl"
BASELINE_EVAL = "baseline_evaluation.json"
TRIALS_DIR = "trials"
TRIAL_RESULT = "trial_result.json"
SELECTION = "selection_decision.json"
FEEDBACK = "feedback_packet.json"
CANDIDATE_EVAL = "artifacts/candidates/evaluation.json"
BOUNDARY_VERDICT = "artifacts/boundary_verdict.json"

Number = int | float


def trial_path(bundle: Path, trial: int) -> Path:
    """`<bundle>/trials/NNN`: where one trial's files are."""
    return bundle / TRIALS_DIR / f"{trial:03d}"


@dataclass
class MetaOutput:
    """What one meta-agent invocation returned (optimizer_output.json) and its trace."""

    status: str  # ok | error | timeout
    summary: str = ""
    parent: str | None = None  # the parent the proposal names (patch/1)
    patch: str | None = None  # patch/1 only
    second_parent: str | None = None  # a merge: the other parent's id (population search)
    error: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    cost_usd: float | None = 0.0
    trace: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        data = {k: v for k, v in self.__dict__.items() if k != "trace"}
        if self.second_parent is None:  # written only for a merge: other records unchanged
            del data["second_parent"]
        return data


class _Record(BaseModel):
    """A bundle record: extra keys of other metaeval versions are kept, not refused."""

    model_config = ConfigDict(extra="allow")


class NodeEval(_Record):
    """Scores of one node (baseline or candidate) on the optimize and held-out suites.

    `status`: evaluated | launch_failed | broken | framework_failure. Each suite summary holds
    `score` (passed/total), `passed`, `failed`, `infra_errors`, `target_errors` and per-task
    rows (`task_id`, `status`, `reward`, `steps`, `reason`, and the bundle paths of the
    task's test log and transcript when kept)."""

    status: str
    optimize: dict[str, Any] | None = None
    held_out: dict[str, Any] | None = None
    error: str | None = None
    target_usage: dict[str, Any] | None = None  # the target's model calls (`target_usage`)

    @property
    def optimize_score(self) -> Number | None:
        return None if self.optimize is None else self.optimize.get("score")

    @property
    def held_out_score(self) -> Number | None:
        return None if self.held_out is None else self.held_out.get("score")


class MetaAgentRun(_Record):
    """What the meta-agent did in a trial: its status, one-line summary, usage and cost."""

    status: str
    summary: str = ""
    usage: dict[str, Any] = Field(default_factory=dict)
    cost_usd: Number | None = None


class LedgerEntry(_Record):
    """One trial's outcome: a line of `trial_ledger.jsonl` and its `trial_result.json`.

    `decision` is promoted | rejected | invalid; `failure_class` is None for a valid
    candidate, else meta_agent_failure | target_agent_failure |
    evaluation_framework_failure."""

    trial: int
    parent_id: str
    candidate_id: str
    candidate_commit: str | None = None
    decision: str | None = None
    failure_class: str | None = None
    optimize_score: Number | None = None
    held_out_score: Number | None = None
    task_failures: int = 0
    meta_agent: MetaAgentRun | None = None
    target: dict[str, Any] | None = None  # the target's model usage in this evaluation
    patch_bytes: int = 0
    wall_clock_s: Number | None = None
    second_parent_id: str | None = None  # a merge's other parent (written only for one)


def ledger_entries(records: Iterable[LedgerEntry | Mapping[str, Any]]) -> list[LedgerEntry]:
    """Ledger lines read through `LedgerEntry` (entries already typed are kept as they are);
    a line that lacks a field or has a wrong type raises ValidationError."""
    return [r if isinstance(r, LedgerEntry) else LedgerEntry.model_validate(r) for r in records]


class CandidateRef(_Record):
    id: str
    commit: str | None = None


class SelectionDecision(_Record):
    """`selection_decision.json`: the parent, the candidate, every reason it is invalid, the
    gate's comparisons (`selection.select`) and the files the patch could not carry."""

    trial: int
    parent: dict[str, Any]
    candidate: CandidateRef
    decision: str | None = None
    failure_class: str | None = None
    reasons: list[dict[str, Any]] = Field(default_factory=list)
    gate: dict[str, Any] | None = None
    left_out_of_patch: list[str] = Field(default_factory=list)


class FeedbackPacket(_Record):
    """`feedback_packet.json`: what later trials' meta-agents see of this one (never a
    held-out score: only the held-out gate's state)."""

    trial: int
    parent_id: str
    decision: str | None = None
    failure_class: str | None = None
    reasons: list[str | None] = Field(default_factory=list)
    optimize: dict[str, Any] | None = None
    held_out_gate: str | None = None
    error: str | None = None


__all__ = [
    "BASELINE_EVAL",
    "BOUNDARY_VERDICT",
    "CANDIDATE_EVAL",
    "FEEDBACK",
    "LEDGER",
    "LEDGER_NAME",
    "SELECTION",
    "TRIALS_DIR",
    "TRIAL_RESULT",
    "CandidateRef",
    "FeedbackPacket",
    "LedgerEntry",
    "MetaAgentRun",
    "MetaOutput",
    "NodeEval",
    "SelectionDecision",
    "ledger_entries",
    "trial_path",
]
