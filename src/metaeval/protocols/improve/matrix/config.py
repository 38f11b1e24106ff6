"""The matrix config a user writes (`metaeval improve matrix CONFIG`).

    description: the paper's 2 x 2 matrix
    output: runs/matrix                  # cell bundles go to <output>/<cell id>
    lanes:                               # meta-agent configurations (SUT configs)
      - {id: claude-code, sut_config: suts/claude_bash.json, target_model: anthropic/...}
    benchmarks:                          # benchmark sets: an optimize view, held-out optional
      - {id: terminal-bench, optimize: {suite_config: suites/tb2.json, split_id: optimize}}
    seeds: [0]
    experiment:                          # every other manifest setting, shared by all cells
      trial_budget: 8
      baseline: {repo: target, base_commit: HEAD}

Relative paths are relative to this file. A lane's `target_model` is the target's model in
its cells (the paper: the target inherits its lane's model); without one the `experiment`'s
`sum` applies. `experiment` may not set what the matrix varies (`sut`, `evaluation`, `seed`,
`output`, `mode`): each cell's manifest is built from it (`cells.cell_manifest`) and checked
like any manifest, so a typo there names the cell's manifest file and the field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from metaeval.config_files import FieldProblem
from metaeval.protocols.improve.config import HeldOut, SuiteRef
from metaeval.records.names import SafeName

VARIED = ("sut", "evaluation", "seed", "output", "mode")
"""The manifest keys each cell sets itself; `experiment` may not hold them."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MatrixLane(_Strict):
    """One meta-agent configuration: its SUT config and the target model of its cells."""

    id: SafeName
    sut_config: Path
    target_model: str | None = None


class MatrixBenchmark(_Strict):
    """One benchmark set: the optimize view and (optionally) the held-out view."""

    id: SafeName
    optimize: SuiteRef
    held_out: HeldOut = Field(default_factory=HeldOut)


def _unique(kind: str, ids: list[Any]) -> None:
    dupes = sorted({str(i) for i in ids if ids.count(i) > 1})
    if dupes:
        raise ValueError(f"duplicate {kind}: {', '.join(dupes)}")


class MatrixConfig(_Strict):
    """Lanes x benchmarks x seeds, and the manifest settings every cell shares."""

    description: str | None = None
    output: Path = Path("runs/matrix")
    lanes: list[MatrixLane] = Field(min_length=1)
    benchmarks: list[MatrixBenchmark] = Field(min_length=1)
    seeds: list[int] = Field(default_factory=lambda: [0], min_length=1)
    concurrency: int = Field(default=1, ge=1, le=64)
    experiment: dict[str, Any] = Field(default_factory=dict)

    @field_validator("lanes")
    @classmethod
    def _lane_ids(cls, value: list[MatrixLane]) -> list[MatrixLane]:
        _unique("lane id(s)", [lane.id for lane in value])
        return value

    @field_validator("benchmarks")
    @classmethod
    def _benchmark_ids(cls, value: list[MatrixBenchmark]) -> list[MatrixBenchmark]:
        _unique("benchmark id(s)", [bench.id for bench in value])
        return value

    @field_validator("seeds")
    @classmethod
    def _seeds(cls, value: list[int]) -> list[int]:
        _unique("seed(s)", value)
        return value

    @field_validator("experiment")
    @classmethod
    def _not_varied(cls, value: dict[str, Any]) -> dict[str, Any]:
        for key in VARIED:
            if key in value:
                raise FieldProblem(key, f"'{key}' is set per cell by the matrix; remove it here")
        return value
