"""Noise before claims (issue 40): the baseline evaluated k times, and the spread gate.

With `baseline_repeats: k` (k >= 2) in the manifest the unchanged baseline is evaluated k
times: the first evaluation is `baseline_evaluation.json` as always (it stays the baseline's
score, the root parent of the search), repeats 2..k go to `baseline_repeats/NN.json`, and
`baseline_noise.json` records the k optimize scores, their mean and their spread.

The spread is the range of the k optimize scores, max - min: the largest difference between
two evaluations of the same code the run has observed. With `noise_gate: above_spread` a
candidate is promoted only when its optimize gain over its parent is strictly greater than
that spread (and every other condition of the selection gate holds); `off` keeps the plain
strict-improvement rule and only reports the spread. Repeats are written one by one, so a
killed run evaluates only the missing ones on resume; a repeat that cannot be evaluated stops
the run before any trial, to be retried.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from metaeval.errors import RetryableRunError
from metaeval.protocols.improve.records import NodeEval, Number, TargetUsage

if TYPE_CHECKING:
    from metaeval.protocols.improve.bundle import BundleFiles

NOISE = "baseline_noise.json"
REPEATS_DIR = "baseline_repeats"
DIGITS = 9
"""Gains and spreads are compared rounded to this many digits (scores are fractions)."""


class BaselineNoise(BaseModel):
    """`baseline_noise.json`: the k optimize scores of the baseline and their spread."""

    model_config = ConfigDict(extra="forbid")

    repeats: int
    optimize_scores: list[Number]
    mean: float
    spread: float
    gate: str  # the manifest's noise_gate: off | above_spread

    @property
    def margin(self) -> float:
        """The gain over the parent a promotion must exceed (0 when the gate is off)."""
        return self.spread if self.gate == "above_spread" else 0.0


def spread(scores: list[Number]) -> float:
    """The range of the scores (max - min)."""
    return round(max(scores) - min(scores), DIGITS)


def repeat_file(bundle: Path, number: int) -> Path:
    return Path(bundle) / REPEATS_DIR / f"{number:02d}.json"


def measure_noise(
    bundle: Path,
    repeats: int,
    gate: str,
    first: NodeEval,
    evaluate: Callable[[int], NodeEval],
    files: BundleFiles,
) -> BaselineNoise | None:
    """Evaluate the baseline's missing repeats (`evaluate(number)`) and write the noise
    record; None when the manifest asks for one evaluation only."""
    if repeats < 2:
        return None
    scores: list[Number] = [first.optimize_score or 0]
    for number in range(2, repeats + 1):
        path = repeat_file(bundle, number)
        if path.is_file():
            node = NodeEval.model_validate(json.loads(path.read_text(encoding="utf-8")))
        else:
            node = evaluate(number)
            if node.status != "evaluated":
                raise RetryableRunError(
                    f"baseline repeat {number} of {repeats} could not be evaluated "
                    f"({node.status}): {node.error}; run the same command again to retry it"
                )
            files.json(path, node.model_dump())
        scores.append(node.optimize_score or 0)
    noise = BaselineNoise(
        repeats=repeats,
        optimize_scores=scores,
        mean=round(sum(scores) / len(scores), DIGITS),
        spread=spread(scores),
        gate=gate,
    )
    files.json(Path(bundle) / NOISE, noise.model_dump())
    return noise


def repeat_usages(bundle: Path) -> list[TargetUsage | None]:
    """The target usage recorded by each baseline repeat written so far (counted in the
    bundle's target cost)."""
    usages = []
    for path in sorted((Path(bundle) / REPEATS_DIR).glob("[0-9][0-9].json")):
        node = NodeEval.model_validate(json.loads(path.read_text(encoding="utf-8")))
        usages.append(node.target_usage)
    return usages


def read_noise(bundle: Path) -> BaselineNoise | None:
    """The bundle's noise record, or None when the baseline was evaluated once."""
    path = Path(bundle) / NOISE
    if not path.is_file():
        return None
    return BaselineNoise.model_validate(json.loads(path.read_text(encoding="utf-8")))


def above_margin(gain: float, margin: float) -> bool:
    """The noise rule: a gain counts when it is strictly greater than the margin."""
    return round(gain, DIGITS) > round(margin, DIGITS)
