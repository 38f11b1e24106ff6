"""Noise before claims (issue 40): `baseline_repeats` and the `above_spread` selection rule."""

from __future__ import annotations

import json
import subprocess
import sys
from types import SimpleNamespace

import pytest

from improve_experiment import experiment, ledger
from metaeval.errors import ConfigError
from metaeval.protocols.improve.bundle import BundleFiles
from metaeval.protocols.improve.noise import measure_noise, read_noise, spread
from metaeval.protocols.improve.plan import build_plan
from metaeval.protocols.improve.records import NodeEval, ParentRef
from metaeval.protocols.improve.selection import select
from metaeval.records import RunDir

PLAN = SimpleNamespace(held_out_tasks=None, selection_gate="record_only", held_out_required=False)


def node(score: float) -> NodeEval:
    return NodeEval(status="evaluated", optimize={"score": score, "passed": 0, "failed": 0})


def test_a_gain_inside_the_baseline_spread_is_not_promoted_and_one_above_it_is():
    parent = ParentRef(id="baseline", commit="c0", optimize_score=0.4)
    spread_of_baseline = spread([0.4, 0.3, 0.5])  # 0.2, hand-computed: 0.5 - 0.3
    assert spread_of_baseline == pytest.approx(0.2)
    inside = select(PLAN, parent, node(0.5), spread_of_baseline)  # +0.1 <= 0.2
    at_edge = select(PLAN, parent, node(0.6), spread_of_baseline)  # +0.2 is not above 0.2
    above = select(PLAN, parent, node(0.7), spread_of_baseline)  # +0.3 > 0.2
    assert inside.decision == "rejected" and at_edge.decision == "rejected"
    assert above.decision == "promoted"
    assert above.model_dump()["optimize"]["noise_margin"] == pytest.approx(0.2)
    # the same candidate inside the noise is promoted by the plain rule (gate off); the
    # margin is written only when it gated
    plain = select(PLAN, parent, node(0.5))
    assert plain.decision == "promoted" and "noise_margin" not in plain.model_dump()["optimize"]


def test_measure_noise_writes_each_repeat_and_the_spread(tmp_path):
    scores = iter([0.3, 0.5])
    asked: list[int] = []

    def evaluate(number: int) -> NodeEval:
        asked.append(number)
        return node(next(scores))

    run = RunDir.open(tmp_path / "b", protocol="improve", config={}, hashes={}, seeds={})
    try:
        noise = measure_noise(
            tmp_path / "b", 3, "above_spread", node(0.4), evaluate, BundleFiles(run)
        )
        assert noise is not None and asked == [2, 3]
        assert noise.optimize_scores == [0.4, 0.3, 0.5]
        assert noise.spread == pytest.approx(0.2) and noise.mean == pytest.approx(0.4)
        assert noise.margin == pytest.approx(0.2)
        assert read_noise(tmp_path / "b") == noise
        # a resume reads the repeats written, evaluates nothing again
        again = measure_noise(
            tmp_path / "b", 3, "above_spread", node(0.4), evaluate, BundleFiles(run)
        )
        assert again == noise and asked == [2, 3]
    finally:
        run.close()


def test_a_failed_repeat_stops_the_run_to_be_retried(tmp_path):
    from metaeval.errors import RetryableRunError

    run = RunDir.open(tmp_path / "b", protocol="improve", config={}, hashes={}, seeds={})
    try:
        with pytest.raises(RetryableRunError, match="baseline repeat 2 of 2"):
            measure_noise(
                tmp_path / "b",
                2,
                "off",
                node(0.4),
                lambda n: NodeEval(status="framework_failure", error="podman gone"),
                BundleFiles(run),
            )
        assert not (tmp_path / "b" / "baseline_repeats").exists()
    finally:
        run.close()


def test_the_spread_gate_without_repeats_is_refused_naming_the_field(tmp_path):
    manifest = experiment(tmp_path)
    data = json.loads(manifest.read_text())
    data["noise_gate"] = "above_spread"
    manifest.write_text(json.dumps(data))
    with pytest.raises(ConfigError) as caught:
        build_plan(manifest)
    assert caught.value.field == "noise_gate" and "baseline_repeats" in str(caught.value)


@pytest.mark.bwrap
def test_baseline_repeats_evaluates_the_baseline_k_times_and_gates_on_the_spread(tmp_path):
    """The scripted demo with the baseline evaluated twice: both repeats are recorded, the
    deterministic target's spread is 0, the gate records its margin, the summary shows it."""
    manifest = experiment(tmp_path)
    data = json.loads(manifest.read_text())
    data.update(baseline_repeats=2, noise_gate="above_spread")
    manifest.write_text(json.dumps(data))
    result = subprocess.run(
        [sys.executable, "-m", "metaeval.cli", "improve", "run", str(manifest)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    bundle = tmp_path / "runs" / "improve-demo"
    first = json.loads((bundle / "baseline_evaluation.json").read_text())
    repeat = json.loads((bundle / "baseline_repeats" / "02.json").read_text())
    noise = json.loads((bundle / "baseline_noise.json").read_text())
    scores = [first["optimize"]["score"], repeat["optimize"]["score"]]
    assert noise["optimize_scores"] == scores
    assert noise["spread"] == pytest.approx(max(scores) - min(scores))
    assert repeat["held_out"] is None  # repeats measure the optimize view only
    summary = json.loads((bundle / "lineage_summary.json").read_text())["summary"]
    assert summary["baseline_noise"] == noise
    # the repeat's target usage counts in the run's target cost
    usages = [first, repeat] + [
        json.loads(p.read_text())
        for p in bundle.glob("trials/*/artifacts/candidates/evaluation.json")
    ]
    costs = [(u.get("target_usage") or {}).get("cost_usd") for u in usages]
    expected = None if None in costs else pytest.approx(sum(costs))
    assert summary["target_cost_usd"] == expected
    entries = ledger(bundle)
    assert entries[0]["decision"] == "promoted"  # 0.0 -> 0.2 is above a spread of 0
    resolved = json.loads((bundle / "resolved_manifest.json").read_text())
    assert resolved["noise"] == {"baseline_repeats": 2, "gate": "above_spread"}
