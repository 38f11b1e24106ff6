"""IMPROVE config files a user writes: the SUT config and the experiment manifest.

Four layers (AIE Bench, Appendix C.3):

1. suite config   - which benchmark slice is evaluated (the typed schema lives in `suites.py`);
2. system profile - how one PACT server is launched (`profiles.SystemProfile`); the target-agent
                    profile (the "SUM profile") also declares the mutable root;
3. SUT config     - the meta-agent lane: contract, agent, tool menu, timeout, launch profile and
                    SUM profile (`SutConfig`);
4. manifest       - one concrete recursive run: baseline, suites, budgets, mutation policy,
                    output (`ExperimentManifest`, Appendix B.1).

`resolve.resolve_manifest` loads a manifest and every file it reaches into the run contract
(`contract.ResolvedManifest`). Every model here forbids unknown keys and is validated strictly
(`"5"` is not a number), so a typo is an error naming the file and the field instead of a
silently ignored setting.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    field_validator,
    model_validator,
)

from metaeval.config_files import FieldProblem
from metaeval.protocols.improve.boundary import MutationBoundary
from metaeval.protocols.improve.profiles import SystemProfile
from metaeval.protocols.improve.search.settings import SearchSettings
from metaeval.records.names import SafeName

# Sane maxima: a typo in a count or a time limit is an error, not a run that never ends (and
# no value reaches a timer or a lock as inf or 1e308, which raise OverflowError there).
MAX_TRIALS = 10_000
MAX_STEPS = 100_000
MAX_SECONDS = 7 * 24 * 3600.0
DEFAULT_TARGET_REPO = "target"
"""The baseline repository when a manifest names none: `target` beside the manifest."""
DEFAULT_META_MAX_STEPS = 40
"""Steps a meta-agent gets per trial when the SUT config sets no `max_steps`."""

MetaAgentName = Literal["scripted", "toolloop", "claude-code", "codex", "gemini-cli", "pact"]
Contract = Literal["patch/1", "edit/1"]
SelectionGate = Literal["record_only", "must_not_regress", "must_improve"]
NoiseGate = Literal["off", "above_spread"]

_HEX_COMMIT = re.compile(r"^[0-9a-fA-F]{7,40}$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# --- SUT config (layer 3) ---------------------------------------------------------------------


class MetaAgentSpec(_Strict):
    """Which agent plays the meta-agent, on which model, with which agent options."""

    agent: MetaAgentName
    model: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)


class SutConfig(_Strict):
    """The benchmarked meta-agent lane.

    `contract` fixes what one proposal is: `patch/1` - the meta-agent returns a unified diff and
    names the parent it was derived from; `edit/1` - the meta-agent edits the optimizer
    worktree and the framework takes the diff against the parent. `launch_profile` is the
    meta-agent's SystemProfile: the PACT server of the `pact` lane, which the harness launches
    and drives each trial (`metaeval.protocols.improve.pact.meta_agent`); the other lanes are
    started by metaeval itself and refuse a launch profile;
    `sum_profile` is the target-agent SystemProfile, which declares `mutable_root` and
    `allowed_mutation_paths`. Either is a path (relative to the file that holds this SUT
    config) or the profile itself, inline; without a `sum_profile` the target is the toolloop
    agent `metaeval improve init` and `init-target toolloop` write
    (`profiles.TOOLLOOP_TARGET`).

    Per trial the meta-agent runs for at most `timeout_s` seconds of wall clock (and never
    longer than the manifest's `budget_step_timeout_s`) and `max_steps` agent steps
    (default 40). `tool_menu` is an allow-list of the tools it is offered (empty: the lane's
    full menu): toolloop's own tool names for the toolloop lane; for a CLI lane the names
    bash, read, write, edit, glob, grep, handed to the CLI's own allow-list (`lane_tools`,
    refused where the CLI cannot enforce them); the scripted and pact lanes refuse a
    non-empty menu.
    """

    name: str = Field(default="sut", min_length=1)
    description: str | None = None
    contract: Contract = "edit/1"
    meta_agent: MetaAgentSpec
    tool_menu: list[str] = Field(default_factory=list)
    timeout_s: float = Field(default=600.0, gt=0, le=MAX_SECONDS)
    max_steps: int = Field(default=DEFAULT_META_MAX_STEPS, ge=1, le=MAX_STEPS)
    launch_profile: Path | SystemProfile | None = None
    sum_profile: Path | SystemProfile | None = None

    @field_validator("tool_menu")
    @classmethod
    def _tools_unique(cls, value: list[str]) -> list[str]:
        dupes = sorted({t for t in value if value.count(t) > 1})
        if dupes:
            raise ValueError(f"duplicate tool(s): {', '.join(dupes)}")
        return value


# --- experiment manifest (layer 4) ------------------------------------------------------------


class SutRef(_Strict):
    """The SUT config in a file of its own (relative to the manifest)."""

    sut_config: Path


def _sut_kind(value: Any) -> str:
    """`file` for `{"sut_config": ...}`, `inline` for a SUT config written in the manifest."""
    if isinstance(value, SutRef) or (isinstance(value, dict) and "sut_config" in value):
        return "sut_config"
    return "inline"


SutSpec = Annotated[
    Annotated[SutRef, Tag("sut_config")] | Annotated[SutConfig, Tag("inline")],
    Discriminator(_sut_kind),
]
"""The manifest's `sut`: a reference to a SUT config file, or the SUT config inline."""


class Baseline(_Strict):
    """The pinned starting target-agent: a git repository and a commit in it."""

    id: SafeName = "baseline"  # the lineage node id of the baseline
    repo: Path = Path(DEFAULT_TARGET_REPO)
    base_commit: str = "HEAD"

    @field_validator("base_commit")
    @classmethod
    def _hex_or_head(cls, value: str) -> str:
        if value == "HEAD":
            return value
        if not _HEX_COMMIT.match(value):
            raise ValueError(f"expected 7-40 hex digits or HEAD, got {value!r}")
        return value.lower()


class SuiteRef(_Strict):
    """The optimize view: a suite config and (optionally) the split to take from it.

    `suite_config` is a suite config file, or a suite directory (holding `suite.json`): then
    the suite config is implied (every setting at its default). `split_id` overrides the
    suite config's own `split_id`; when omitted, the suite config's value is used. The
    effective split is recorded in the resolved manifest.
    """

    suite_config: Path
    split_id: str | None = None


class HeldOut(_Strict):
    """The held-out view: never shown to the meta-agent, used by the selection gate.

    `required: true` enables held-out evaluation and needs `suite_config`. `selection_gate`:
    `record_only` (held-out scores are recorded, promotion depends on optimize only),
    `must_not_regress` or `must_improve` (promotion additionally needs the held-out aggregate
    to hold or to rise). The two gating values need `required: true`.
    """

    required: bool = False
    suite_config: Path | None = None
    split_id: str | None = None
    selection_gate: SelectionGate = "record_only"

    @model_validator(mode="after")
    def _consistent(self) -> HeldOut:
        if self.required and self.suite_config is None:
            raise FieldProblem("suite_config", "required is true but no suite_config is given")
        if not self.required:
            if self.selection_gate != "record_only":
                raise FieldProblem(
                    "selection_gate",
                    f"'{self.selection_gate}' gates on held-out scores; set required: true "
                    "and give a suite_config, or use 'record_only'",
                )
            for name in ("suite_config", "split_id"):
                if getattr(self, name) is not None:
                    raise FieldProblem(
                        name,
                        "held-out evaluation is off (required: false); set required: true to "
                        "evaluate it, or remove this field",
                    )
        return self


class Evaluation(_Strict):
    optimize: SuiteRef
    held_out: HeldOut = Field(default_factory=HeldOut)


class TargetBudget(_Strict):
    """The target-agent evaluation budget: steps and wall time per task, for every version.

    Distinct from the optimizer trial budget (Section 3.4); fixed for the whole experiment.
    """

    max_steps_per_task: int = Field(ge=1, le=MAX_STEPS)
    task_timeout_s: float = Field(gt=0, le=MAX_SECONDS)


class TargetModelSettings(_Strict):
    """The target agent's model (manifest `sum`), fixed for every version of the target.

    `model` is a metaeval model name (`local/smollm2`, `openai/gpt-4o`, `anthropic/...`,
    `litellm/...`) or `none`. Targets whose profile says `model_api: openai` reach it over an
    OpenAI-compatible endpoint: `base_url` names an existing server (vLLM, llama.cpp, Ollama;
    its key read from the environment variable `api_key_env`); without one, a `local/` model is
    served by the harness with llama-cpp-python's server on 127.0.0.1 (`n_ctx` tokens of
    context) for the whole run. `max_tokens` caps each reply and `temperature` sets sampling
    (null: the provider's default; 0 for reproducible local runs).
    """

    model: str = "local/smollm2"
    base_url: str | None = None
    api_key_env: str | None = None
    n_ctx: int = Field(default=8192, ge=512, le=1_048_576)
    max_tokens: int | None = Field(default=None, ge=1, le=1_048_576)
    temperature: float | None = Field(default=None, ge=0, le=2)

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("base_url must start with http:// or https://")
        return value


class MutationPolicy(_Strict):
    """Where the mutation boundary comes from.

    `sum_profile`: the SUM profile's `mutable_root`/`allowed_mutation_paths`; `boundary`, if
    given, is a narrowing override. `file`: the boundary file is the declared boundary.
    `boundary` is relative to the manifest.
    """

    source: Literal["sum_profile", "file"] = "sum_profile"
    boundary: Path | MutationBoundary | None = None

    @model_validator(mode="after")
    def _file_needs_boundary(self) -> MutationPolicy:
        if self.source == "file" and self.boundary is None:
            raise FieldProblem("boundary", "source is 'file' but no boundary file is given")
        return self


class ExperimentManifest(_Strict):
    """One recursive run (Appendix B.1). Relative paths are relative to the manifest file.

    Defaults where the paper's manifest leaves a setting out: `baseline` is the repository
    `target` beside the manifest at `HEAD` (what `metaeval improve init` writes);
    `target_budget` is the optimize suite config's `max_steps_per_task` and `task_timeout_s`;
    `output` is `runs/<experiment>` under the current directory (`resolve.default_output`);
    an `output` the manifest names is relative to the manifest like its other paths.
    """

    mode: Literal["recursive_search"]
    description: str | None = None
    sut: SutSpec
    sum: TargetModelSettings = Field(default_factory=TargetModelSettings)
    baseline: Baseline = Field(default_factory=Baseline)
    evaluation: Evaluation
    trial_budget: int = Field(ge=1, le=MAX_TRIALS)  # candidate proposals over the whole run
    budget_step_timeout_s: float = Field(
        default=1200.0, gt=0, le=MAX_SECONDS
    )  # wall time for one trial
    target_budget: TargetBudget | None = None
    mutation_policy: MutationPolicy = Field(default_factory=MutationPolicy)
    output: Path | None = None
    seed: int = 0
    # --- population search (issue 41): the policy choosing parents; default: recursive ---
    search: SearchSettings = Field(default_factory=SearchSettings)

    # --- noise before claims (issue 40; `noise.py`) ---
    baseline_repeats: int = Field(default=1, ge=1, le=100)
    """How many times the baseline is evaluated; the spread of its optimize scores is reported."""
    noise_gate: NoiseGate = "off"
    """`above_spread`: a promotion also needs a gain over the parent above the baseline's spread."""

    @model_validator(mode="after")
    def _noise_needs_repeats(self) -> ExperimentManifest:
        if self.noise_gate != "off" and self.baseline_repeats < 2:
            raise FieldProblem(
                "noise_gate",
                f"'{self.noise_gate}' compares gains with the baseline's spread, which needs "
                "baseline_repeats of 2 or more",
            )
        return self


__all__ = [
    "Baseline",
    "Evaluation",
    "ExperimentManifest",
    "HeldOut",
    "MetaAgentSpec",
    "MutationPolicy",
    "SuiteRef",
    "SutConfig",
    "SutRef",
    "TargetBudget",
    "TargetModelSettings",
]
