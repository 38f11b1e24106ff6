"""Finder outcomes that are not answers: an unparsable answer, a timeout, and a cell re-run after
an infrastructure failure.

Real runs over the example pack (reference builder, reference finder) in which one finder is
wrapped to misbehave: its formal answer is prose without any JSON object, its spec-only run
times out, and its question-only run loses its connection once. Expected: the unparsable and
timed-out cells are failed cells (counted, shown in the failed_cells table, no question rows),
never a run of wrong answers; with `retry_unparsable` the finder is asked once more with a
reminder and the second answer is scored; the re-run question-only cell shows the finder the
same option order as an undisturbed run of the same cell.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
import yaml

from metaeval.protocols.buildfind.cells import context as cell_context
from metaeval.protocols.buildfind.config import load_config
from metaeval.protocols.buildfind.finalize import run_and_finalize

PACK = Path(__file__).resolve().parents[1] / "examples" / "buildfind-pack"
PROSE = "I looked at the code. I believe the first answer is B and the second one is A."


class Misbehaving:
    """The reference finder, except: formal answers are prose (unless the prompt carries the
    reminder), spec-only runs time out, the first question-only run loses its connection."""

    def __init__(self, inner, faults: bool, resets: list[int]):
        self.inner, self.faults, self.name = inner, faults, "odd"
        self.prompts: list[str] = []
        self.resets = resets  # shared by the wrappers of every run of one run directory

    def run(self, task, workspace, limits):
        self.prompts.append(task.instruction)
        slice_name = task.metadata["slice"]
        if self.faults and slice_name == "question_only" and not self.resets:
            self.resets.append(1)
            raise ConnectionResetError(104, "Connection reset by peer")
        result = self.inner.run(task, workspace, limits)
        if not self.faults:
            return result
        if slice_name == "spec_only":
            return result.model_copy(update={"status": "timeout", "stop_reason": "time limit"})
        if slice_name == "formal" and "REMINDER" not in task.instruction:
            return result.model_copy(update={"submission": PROSE})
        return result


class Mute:
    """A finder every run of which times out: it leaves no question rows at all."""

    def __init__(self, inner):
        self.inner, self.name = inner, "mute"

    def run(self, task, workspace, limits):
        result = self.inner.run(task, workspace, limits)
        return result.model_copy(update={"status": "timeout", "stop_reason": "time limit"})


def run_once(tmp_path: Path, monkeypatch, *, retry: bool, faults: bool = True, mute=False):
    tmp_path.mkdir(parents=True, exist_ok=True)
    config_path = tmp_path / "run.yaml"
    config_path.write_text(
        yaml.safe_dump(
            {
                "pack": str(PACK),
                "tasks": ["http-router"],
                "builders": [{"name": "documented", "agent": "reference:documented"}],
                "finders": [
                    {"name": "ref", "agent": "reference-finder"},
                    {"name": "odd", "agent": "reference-finder"},
                    *([{"name": "mute", "agent": "reference-finder"}] if mute else []),
                ],
                "r_build": 1,
                "r_find": 1,
                "controls": ["question_only", "spec_only"],
                "retry_unparsable": retry,
            }
        )
    )
    wrapped: list[Misbehaving] = []
    resets: list[int] = []
    real_make_agent = cell_context.make_agent

    def make_agent(spec, role):
        agent = real_make_agent(spec, role)
        if spec.name == "mute":
            return Mute(agent)
        if spec.name != "odd":
            return agent
        wrapped.append(Misbehaving(agent, faults, resets))
        return wrapped[-1]

    monkeypatch.setattr(cell_context, "make_agent", make_agent)
    run_dir = tmp_path / "run"
    summary = {}
    for _ in range(2):  # the second run re-runs the infrastructure failure only
        summary = run_and_finalize(load_config(config_path), run_dir)[1]
    finds = [json.loads(line) for line in (run_dir / "finds.jsonl").read_text().splitlines()]
    rows = pl.read_parquet(run_dir / "question_rows.parquet")
    return run_dir, summary, finds, rows, wrapped


def odd(finds: list[dict], slice_name: str) -> list[dict]:
    return [r for r in finds if r["finder"] == "odd" and r["slice"] == slice_name]


@pytest.mark.timeout(600)
def test_unparsable_and_timed_out_finds_are_failed_cells(tmp_path, monkeypatch):
    run_dir, summary, finds, rows, wrapped = run_once(tmp_path, monkeypatch, retry=False, mute=True)
    formal = odd(finds, "formal")
    assert len(formal) == 1 and formal[0]["status"] == "ok"
    assert formal[0]["answers_status"] == "unparsable"
    assert "unparsable_first_attempt" not in formal[0]  # no retry unless the config asks
    assert not any("REMINDER" in p for w in wrapped for p in w.prompts)
    # neither the unparsable nor the timed-out cell contributes a single (wrong) row
    odd_rows = rows.filter(pl.col("finder") == "odd")
    assert odd_rows.get_column("slice").unique().to_list() == ["question_only"]
    assert rows.filter(pl.col("finder") == "ref").get_column("slice").n_unique() == 3
    assert "mute" not in rows.get_column("finder").to_list()
    # odd: formal unparsable, spec-only timed out; mute: all three cells timed out
    assert summary["failed_cells"] == {
        "builds": 0,
        "finds": 5,
        "by_kind": {"timeout": 4, "unparsable": 1},
    }
    reasons = {r["slice"]: r for r in summary["failed_cell_reasons"]}
    assert reasons["formal"]["kind"] == "unparsable"
    assert reasons["formal"]["reason"].startswith("unparsable")
    assert reasons["spec_only"]["kind"] == "timeout"
    table = pl.read_csv(run_dir / "tables" / "failed_cells.csv")
    assert sorted(table.get_column("kind").to_list()) == [*["timeout"] * 4, "unparsable"]
    # finder_calibration lists every configured finder, also one without a single row
    calibration = pl.read_csv(run_dir / "tables" / "finder_calibration.csv")
    assert sorted(calibration.get_column("finder").to_list()) == ["mute", "odd", "ref"]
    mute = calibration.filter(pl.col("finder") == "mute").row(0, named=True)
    assert mute["formal_runs"] == 0 and mute["formal_recovery"] is None


@pytest.mark.timeout(600)
def test_unparsable_answer_is_retried_once_with_a_reminder(tmp_path, monkeypatch):
    _, summary, finds, rows, wrapped = run_once(tmp_path, monkeypatch, retry=True)
    formal = odd(finds, "formal")
    assert len(formal) == 1 and formal[0]["answers_status"] == "ok"
    first = formal[0]["unparsable_first_attempt"]
    assert first["answers_problem"].startswith("unparsable")
    reminded = [p for w in wrapped for p in w.prompts if "REMINDER" in p]
    assert len(reminded) == 1  # exactly one retry, for the one unparsable answer
    ref = odd(finds, "formal")[0]["answers"]
    scored = rows.filter((pl.col("finder") == "odd") & (pl.col("slice") == "formal"))
    assert scored.height == len(ref) > 0
    assert summary["failed_cells"]["by_kind"] == {"timeout": 1}


@pytest.mark.timeout(600)
def test_a_cell_rerun_after_an_infrastructure_failure_sees_the_same_option_order(
    tmp_path, monkeypatch
):
    _, _, faulty, _, _ = run_once(tmp_path / "a", monkeypatch, retry=False)
    _, _, clean, _, _ = run_once(tmp_path / "b", monkeypatch, retry=False, faults=False)
    [attempt, recovered] = odd(faulty, "question_only")
    assert attempt["infra_error"] is True and recovered["recovery"] == 1
    [undisturbed] = odd(clean, "question_only")
    assert undisturbed["recovery"] == 0
    assert recovered["permutation"] == undisturbed["permutation"]
    assert recovered["answers"] == undisturbed["answers"]


@pytest.mark.timeout(600)
def test_a_builder_that_wrote_no_file_fails_the_compile_probe(tmp_path, monkeypatch):
    """`python -m compileall .` (the example pack's probe) passes on an empty directory; a
    build whose builder submitted without writing anything must still fail the probe."""
    from metaeval.agents.scripted import ScriptedAgent

    config_path = tmp_path / "run.yaml"
    config_path.write_text(
        yaml.safe_dump(
            {
                "pack": str(PACK),
                "tasks": ["http-router"],
                "builders": [
                    {"name": "documented", "agent": "reference:documented"},
                    {"name": "lazy", "agent": "reference:documented"},
                ],
                "finders": [{"name": "ref", "agent": "reference-finder"}],
                "r_find": 1,
                "controls": [],
            }
        )
    )
    real_make_agent = cell_context.make_agent

    def make_agent(spec, role):
        if spec.name == "lazy":
            return ScriptedAgent([("submit", {"answer": "done"})], name="lazy")
        return real_make_agent(spec, role)

    monkeypatch.setattr(cell_context, "make_agent", make_agent)
    run_dir = tmp_path / "run"
    run_and_finalize(load_config(config_path), run_dir)
    builds = {
        r["builder"]: r
        for r in map(json.loads, (run_dir / "builds.jsonl").read_text().splitlines())
    }
    lazy, documented = builds["lazy"], builds["documented"]
    assert lazy["status"] == "ok" and lazy["validation"]["files"] == 0
    assert lazy["validation"]["returncode"] == 0  # the probe command itself succeeded
    assert lazy["compile_pass"] is False and lazy["validation"]["wrote_nothing"] is True
    assert documented["compile_pass"] is True and "wrote_nothing" not in documented["validation"]
