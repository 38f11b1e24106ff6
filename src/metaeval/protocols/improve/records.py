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
from typing import Any, ClassVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from metaeval.protocols.improve.patch_verdict import Reason

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


class BundleRecord(BaseModel):
    """A bundle record: extra keys of other metaeval versions are kept, not refused.

    A field named in `_written_when_set` is left out of the JSON while it is None: the
    harness writes it only when it has a value (a merge's second parent, a kept log)."""

    model_config = ConfigDict(extra="allow")
    _written_when_set: ClassVar[frozenset[str]] = frozenset()

    @model_serializer(mode="wrap")
    def _leave_out_unset(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        for name in self._written_when_set:
            if isinstance(data, dict) and data.get(name, 0) is None:
                del data[name]
        return data


class TaskRow(BundleRecord):
    """One task of a suite summary: its status, reward, steps and reason, where it ran, the
    target's reported usage, and the bundle paths (and raw sizes) of its kept test log and
    transcript."""

    _written_when_set = frozenset({"test_log", "test_log_bytes", "trace", "trace_bytes"})

    task_id: str
    status: str
    reward: Number | None = None
    steps: int = 0
    reason: str = ""
    backend: str = ""
    image_id: str | None = None
    usage: dict[str, int] = Field(default_factory=dict)
    test_log: str | None = None
    test_log_bytes: int | None = None
    trace: str | None = None
    trace_bytes: int | None = None


class SuiteSummary(BundleRecord):
    """One suite of a node's evaluation: `score` (passed/total), the counts and the rows."""

    score: Number | None = None
    passed: int = 0
    failed: int = 0
    infra_errors: int = 0
    target_errors: int = 0
    tasks: list[TaskRow] = Field(default_factory=list)

    def rows(self, status: str) -> list[TaskRow]:
        """The task rows of one status."""
        return [t for t in self.tasks if t.status == status]


class TargetUsage(BundleRecord):
    """The target's model use in one evaluation: who counted it (`gateway`, or
    `target_reported` when only the target's own word is known), tokens and cost (None:
    unknown); `calls` when the gateway counted them."""

    _written_when_set = frozenset({"calls"})

    source: str
    calls: int | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: Number | None = None


class NodeEval(BundleRecord):
    """Scores of one node (baseline or candidate) on the optimize and held-out suites.

    `status`: evaluated | launch_failed | broken | framework_failure."""

    status: str
    optimize: SuiteSummary | None = None
    held_out: SuiteSummary | None = None
    error: str | None = None
    target_usage: TargetUsage | None = None  # the target's model calls (`target_usage`)

    @property
    def optimize_score(self) -> Number | None:
        return None if self.optimize is None else self.optimize.score

    @property
    def held_out_score(self) -> Number | None:
        return None if self.held_out is None else self.held_out.score

    def suites(self) -> list[SuiteSummary]:
        """The suites evaluated (optimize first)."""
        return [s for s in (self.optimize, self.held_out) if s is not None]

    def suite(self, name: str) -> SuiteSummary | None:
        """The `optimize` or `held_out` suite."""
        return self.optimize if name == "optimize" else self.held_out


class MetaAgentRun(BundleRecord):
    """What the meta-agent did in a trial: its status, one-line summary, usage and cost."""

    status: str
    summary: str = ""
    usage: dict[str, int] = Field(default_factory=dict)
    cost_usd: Number | None = None


class LedgerEntry(BundleRecord):
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
    target: TargetUsage | None = None  # the target's model usage in this evaluation
    patch_bytes: int = 0
    wall_clock_s: Number | None = None
    second_parent_id: str | None = None  # a merge's other parent (written only for one)

    _written_when_set = frozenset({"second_parent_id"})

    @property
    def valid(self) -> bool:
        """True for an evaluated candidate (no failure class): one a trial may build on."""
        return self.failure_class is None and self.candidate_commit is not None


def ledger_entries(records: Iterable[LedgerEntry | Mapping[str, Any]]) -> list[LedgerEntry]:
    """Ledger lines read through `LedgerEntry` (entries already typed are kept as they are);
    a line that lacks a field or has a wrong type raises ValidationError."""
    return [r if isinstance(r, LedgerEntry) else LedgerEntry.model_validate(r) for r in records]


class CandidateRef(BundleRecord):
    id: str
    commit: str | None = None


class ParentRef(BundleRecord):
    """The node a trial patched, as the loop and the gate read it (`trial` for a candidate)."""

    _written_when_set = frozenset({"trial"})

    id: str
    commit: str | None = None
    optimize_score: Number | None = None
    held_out_score: Number | None = None
    trial: int | None = None

    @property
    def checkout(self) -> str:
        """The commit a trial from this parent starts at (a parent is a valid node)."""
        if self.commit is None:
            raise ValueError(f"parent {self.id} has no commit: it cannot be patched")
        return self.commit


class OptimizeGate(BundleRecord):
    """The optimize comparison: strictly better than the parent (by more than
    `noise_margin`, written only under `noise_gate: above_spread`)."""

    _written_when_set = frozenset({"noise_margin"})

    parent: Number | None = None
    candidate: Number | None = None
    strictly_better: bool = False
    noise_margin: Number | None = None


class HeldOutGate(BundleRecord):
    """The held-out check: the gate, its state (not_required | recorded | unavailable |
    passed | failed) and both scores."""

    gate: str | None = None
    state: str | None = None
    parent: Number | None = None
    candidate: Number | None = None


class Gate(BundleRecord):
    """The selection gate's comparisons and its decision (promoted | rejected)."""

    optimize: OptimizeGate = Field(default_factory=OptimizeGate)
    held_out: HeldOutGate = Field(default_factory=HeldOutGate)
    decision: str


class SelectionDecision(BundleRecord):
    """`selection_decision.json`: the parent, the candidate, every reason it is invalid, the
    gate's comparisons (`selection.select`) and the files the patch could not carry."""

    _written_when_set = frozenset({"second_parent"})

    trial: int
    parent: ParentRef
    candidate: CandidateRef
    decision: str | None = None
    failure_class: str | None = None
    reasons: list[Reason] = Field(default_factory=list)
    gate: Gate | None = None
    left_out_of_patch: list[str] = Field(default_factory=list)
    second_parent: ParentRef | None = None  # a merge's other parent


class TaskView(BundleRecord):
    """One task as a meta-agent sees it."""

    task_id: str
    status: str
    reward: Number | None = None
    reason: str = ""


class SuiteView(BundleRecord):
    """An optimize summary as a meta-agent sees it: score, counts, per-task rows."""

    score: Number | None = None
    passed: int | None = None
    failed: int | None = None
    tasks: list[TaskView] = Field(default_factory=list)

    @classmethod
    def of(cls, summary: SuiteSummary | None) -> SuiteView | None:
        if summary is None:
            return None
        return cls(
            score=summary.score,
            passed=summary.passed,
            failed=summary.failed,
            tasks=[
                TaskView(task_id=t.task_id, status=t.status, reward=t.reward, reason=t.reason)
                for t in summary.tasks
            ],
        )


class FeedbackPacket(BundleRecord):
    """`feedback_packet.json`: what later trials' meta-agents see of this one (never a
    held-out score: only the held-out gate's state)."""

    trial: int
    parent_id: str
    decision: str | None = None
    failure_class: str | None = None
    reasons: list[str | None] = Field(default_factory=list)
    optimize: SuiteView | None = None
    held_out_gate: str | None = None
    error: str | None = None


__all__ = [
    "BASELINE_EVAL",
    "BundleRecord",
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
    "Gate",
    "HeldOutGate",
    "LedgerEntry",
    "MetaAgentRun",
    "MetaOutput",
    "NodeEval",
    "OptimizeGate",
    "ParentRef",
    "SelectionDecision",
    "SuiteSummary",
    "SuiteView",
    "TargetUsage",
    "TaskRow",
    "TaskView",
    "ledger_entries",
    "trial_path",
]
