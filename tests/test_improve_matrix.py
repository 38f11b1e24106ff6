"""`metaeval improve matrix`: lanes x benchmark sets from one config, each cell an ordinary
bundle, resumed after SIGKILL, and a matrix report whose numbers are recomputed here by hand
from the cells' ledgers (issue 40)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from improve_experiment import experiment, ledger

CELLS = [
    "scripted-a--terminal",
    "scripted-a--function-calling",
    "scripted-b--terminal",
    "scripted-b--function-calling",
]


def matrix_config(tmp_path: Path, **changes: object) -> Path:
    """The scripted 2 x 2 example in tmp_path (target initialised), with `changes` applied."""
    manifest = experiment(tmp_path)
    config = manifest.parent / "matrix-scripted.yaml"
    data = yaml.safe_load(config.read_text())
    data.update(changes)
    config.write_text(yaml.safe_dump(data))
    return config


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "metaeval.cli", "improve", "matrix", *args],
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_plan_lists_each_cell_with_its_evaluations_and_call_bounds(tmp_path):
    config = matrix_config(tmp_path)
    result = cli(str(config), "--plan")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert [line.split(":")[0] for line in lines[:4]] == CELLS
    # 10 optimize tasks, no held-out, budget 3: baseline + 3 candidates = 4 evaluations of
    # 10 episodes, 8 steps each; lane a has 40 meta-agent steps a trial, lane b 10
    terminal_a = lines[0]
    assert "10 optimize + 0 held-out tasks, trials 0/3 done, baseline x1" in terminal_a
    assert "4 evaluations, 40 task episodes, 320 target calls, 120 meta-agent steps" in terminal_a
    assert "30 meta-agent steps" in lines[2]
    assert lines[4].startswith("total: 4 cells, at most 16 evaluations, 160 task episodes")
    bundles = tmp_path / "runs" / "improve-matrix"
    assert sorted(p.name for p in (bundles / "manifests").iterdir()) == sorted(
        f"{cell}.json" for cell in CELLS
    )
    assert not (bundles / CELLS[0]).exists()  # planned, nothing run


def test_a_bad_matrix_config_names_the_file_and_field(tmp_path):
    config = matrix_config(tmp_path)
    data = yaml.safe_load(config.read_text())
    data["lanes"].append(dict(data["lanes"][0]))
    config.write_text(yaml.safe_dump(data))
    duplicate = cli(str(config), "--plan")
    assert duplicate.returncode == 2
    assert str(config) in duplicate.stderr and "lanes" in duplicate.stderr
    assert "duplicate lane id(s): scripted-a" in duplicate.stderr

    data["lanes"].pop()
    data["experiment"]["seed"] = 3
    config.write_text(yaml.safe_dump(data))
    varied = cli(str(config), "--plan")
    assert varied.returncode == 2 and "experiment.seed" in varied.stderr

    del data["experiment"]["seed"]
    data["experiment"]["trial_budget"] = "8"  # a string is not a number: the cell says so
    config.write_text(yaml.safe_dump(data))
    typo = cli(str(config), "--plan")
    assert typo.returncode == 2 and "trial_budget" in typo.stderr
    assert "manifests/scripted-a--terminal.json" in typo.stderr


def hand_row(bundle: Path) -> dict:
    """A cell's Table 3 numbers and trial outcomes, computed from its ledger and baseline."""
    entries = ledger(bundle)
    base = json.loads((bundle / "baseline_evaluation.json").read_text())["optimize"]
    total = base["passed"] + base["failed"] + base["infra_errors"] + base["target_errors"]
    baseline = base["passed"] / total
    promoted = [e for e in entries if e["decision"] == "promoted"]
    best = promoted[-1]["optimize_score"] if promoted else baseline
    meta_costs = [e["meta_agent"]["cost_usd"] for e in entries]
    usages = [json.loads((bundle / "baseline_evaluation.json").read_text()).get("target_usage")]
    usages += [
        json.loads(p.read_text()).get("target_usage")
        for p in bundle.glob("baseline_repeats/*.json")
    ]
    usages += [e["target"] for e in entries if e["candidate_commit"]]
    target_costs = [(u or {}).get("cost_usd") for u in usages]
    return {
        "meta_cost": None if None in meta_costs else sum(meta_costs),
        "target_cost": None if None in target_costs else sum(target_costs),
        "trials": len(entries),
        "baseline": baseline,
        "best": best,
        "delta": best - baseline,
        "promoted": len(promoted),
        "rejected": sum(e["decision"] == "rejected" for e in entries),
        "invalid": {
            name: sum(e["failure_class"] == name for e in entries)
            for name in (
                "meta_agent_failure",
                "target_agent_failure",
                "evaluation_framework_failure",
            )
        },
    }


@pytest.mark.bwrap
def test_the_2x2_matrix_runs_resumes_after_sigkill_and_reports_the_ledgers(tmp_path):
    config = matrix_config(tmp_path)
    bundles = tmp_path / "runs" / "improve-matrix"
    first_ledger = bundles / CELLS[0] / "trial_ledger.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "metaeval.cli", "improve", "matrix", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        if first_ledger.exists() and first_ledger.read_bytes().count(b"\n") >= 1:
            break
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    kept = first_ledger.read_bytes()
    assert 1 <= kept.count(b"\n") < 3, "the kill should land inside the first cell"
    assert not (bundles / "matrix_summary.json").exists()

    result = cli(str(config))
    assert result.returncode == 0, result.stderr
    assert first_ledger.read_bytes().startswith(kept)  # resumed, nothing redone or lost
    rows = json.loads((bundles / "matrix_summary.json").read_text())
    assert [row["cell"] for row in rows] == CELLS
    text = (bundles / "matrix_report.txt").read_text()
    html = (bundles / "matrix_report.html").read_text()
    for row in rows:
        bundle = bundles / row["cell"]
        hand = hand_row(bundle)
        assert hand["trials"] == 3 and row["status"] == "finished"
        assert row["trials"] == hand["trials"]
        assert row["baseline"] == pytest.approx(hand["baseline"])
        assert row["best"] == pytest.approx(hand["best"])
        assert row["delta"] == pytest.approx(hand["delta"])
        assert (row["promoted"], row["rejected"]) == (hand["promoted"], hand["rejected"])
        assert row["invalid"] == hand["invalid"]
        for key, hand_key in (
            ("meta_agent_cost_usd", "meta_cost"),
            ("target_cost_usd", "target_cost"),
        ):
            if hand[hand_key] is None:
                assert row[key] is None
            else:
                assert row[key] == pytest.approx(hand[hand_key])
        # the cell is an ordinary bundle of its own manifest
        resolved = json.loads((bundle / "resolved_manifest.json").read_text())
        assert resolved["manifest"] == str(bundles / "manifests" / f"{row['cell']}.json")
        line = next(
            t.split() for t in text.splitlines() if t.split()[:2] == [row["lane"], row["benchmark"]]
        )
        assert line[3:6] == [
            f"{100 * hand['baseline']:.1f}",
            f"{100 * hand['best']:.1f}",
            f"{100 * hand['delta']:+.1f}",
        ]
        assert f"<td>{100 * hand['best']:.1f}</td>" in html
    # the scripted lanes' terminal cells promote the recipe edit; the BFCL-style cells don't
    terminal = next(r for r in rows if r["cell"] == "scripted-a--terminal")
    assert terminal["promoted"] == 1 and terminal["delta"] > 0
    assert terminal["invalid"]["meta_agent_failure"] == 1


def test_the_paper_matrix_example_is_a_valid_config_with_enforceable_lane_menus():
    """examples/improve/matrix-paper.yaml (it needs keys and the Harbor datasets to run): its
    lanes' SUT configs load and their tool menus map onto the CLIs' own allow-lists."""
    from improve_experiment import ROOT
    from metaeval.config_files import load
    from metaeval.protocols.improve.config import SutConfig
    from metaeval.protocols.improve.matrix.cells import load_matrix
    from metaeval.protocols.improve.meta_agents import apply_tool_menu, make_meta_agent

    path = ROOT / "examples" / "improve" / "matrix-paper.yaml"
    config = load_matrix(path)
    assert [lane.id for lane in config.lanes] == ["claude-code", "gemini-cli"]
    assert config.experiment["trial_budget"] == 8
    allowed = {}
    for lane in config.lanes:
        sut = load(path.parent / lane.sut_config, SutConfig)
        meta = make_meta_agent(sut.meta_agent.model_dump())
        apply_tool_menu(meta, sut.tool_menu, str(lane.sut_config))
        allowed[lane.id] = meta.agent.allowed_tools
    assert allowed["claude-code"] == ["Bash"]
    assert len(allowed["gemini-cli"]) == 6


def test_a_cell_without_a_finished_run_is_shown_as_such_never_as_zero(tmp_path):
    from metaeval.protocols.improve.matrix.cells import Cell
    from metaeval.protocols.improve.matrix.report import cell_row, render_text, row_cells

    cell = Cell("a--b", "a", "b", 0, tmp_path / "m.json", tmp_path / "a--b")
    fresh = cell_row(cell)
    assert fresh.status == "not run" and fresh.baseline is None
    assert row_cells(fresh)[3:6] == ["-", "-", "-"]
    failed = cell_row(cell, "the baseline could not be evaluated (framework_failure)")
    assert failed.status.startswith("failed: the baseline could not be evaluated")
    (tmp_path / "a--b").mkdir()
    (tmp_path / "a--b" / "trial_ledger.jsonl").write_text(
        json.dumps({"trial": 1, "decision": "invalid", "failure_class": "meta_agent_failure"})
        + '\n{"trial": 2, "decis'  # the torn last line of a killed run
    )
    partial = cell_row(cell)
    assert partial.status == "partial" and partial.trials == 1
    assert partial.invalid["meta_agent_failure"] == 1
    assert "partial" in render_text("t", [partial])
