"""Reruns of `buildfind run` (issue 29, item 1): the same config resumes, a config change that
alters what a cell means is refused by name with the ways out (and never merged into the old
tables), and `tasks` narrows a run without invalidating it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

PACK = Path(__file__).resolve().parents[1] / "examples" / "buildfind-pack"
RECORDS = ("builds.jsonl", "finds.jsonl")


def config(path: Path, *, controls: str = "[question_only, spec_only]", tasks: str = "[]") -> Path:
    path.write_text(
        f"pack: {PACK}\n"
        f"tasks: {tasks}\n"
        "builders:\n"
        "  - {name: documented, agent: 'reference:documented', effort: low, family: reference}\n"
        "finders:\n"
        "  - {name: ref-finder, agent: reference-finder, effort: low, family: reference}\n"
        "r_build: 1\nr_find: 1\nseed0: 7\n"
        f"controls: {controls}\n"
        "concurrency: 2\n"
    )
    return path


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "metaeval.cli", "buildfind", "run", *args],
        capture_output=True,
        text=True,
        timeout=600,
    )


def snapshot(run_dir: Path) -> list[bytes]:
    return [(run_dir / name).read_bytes() for name in RECORDS]


@pytest.fixture(scope="module")
def first_run(tmp_path_factory) -> tuple[Path, Path]:
    """(run dir, config) of a finished run: 2 tasks, 1 builder, 1 finder, 2 controls."""
    base = tmp_path_factory.mktemp("bf-reruns")
    cfg, run_dir = config(base / "run.yaml"), base / "run"
    first = cli(str(cfg), "-o", str(run_dir))
    assert first.returncode == 0, first.stderr
    assert "2 build(s) and 6 find(s) run;" in first.stdout
    return run_dir, cfg


def test_same_config_resumes_and_redoes_nothing(first_run):
    run_dir, cfg = first_run
    before = snapshot(run_dir)
    again = cli(str(cfg), "-o", str(run_dir))
    assert again.returncode == 0, again.stderr
    assert "0 build(s) and 0 find(s) run (8 reused)" in again.stdout
    assert snapshot(run_dir) == before


def test_tasks_narrows_an_existing_run_and_reuses_its_cells(first_run, tmp_path):
    run_dir, _ = first_run
    before = snapshot(run_dir)
    narrowed = cli(str(config(tmp_path / "one.yaml", tasks="[kvstore-wal]")), "-o", str(run_dir))
    assert narrowed.returncode == 0, narrowed.stderr
    assert "0 build(s) and 0 find(s) run (4 reused)" in narrowed.stdout
    assert snapshot(run_dir) == before


def test_a_changed_setting_is_refused_by_name_and_both_ways_out_work(first_run, tmp_path):
    run_dir, _ = first_run
    before = snapshot(run_dir)
    summary_before = (run_dir / "summary.json").read_bytes()
    changed = config(tmp_path / "changed.yaml", controls="[question_only]")
    refused = cli(str(changed), "-o", str(run_dir))
    assert refused.returncode == 2, refused.stderr
    message = " ".join(refused.stderr.split())  # the console wraps long lines
    assert (
        'setting \'controls\' changed: ["question_only","spec_only"] -> ["question_only"]'
        in message
    )
    assert "-o NEW_DIR" in message and "--new-layer NAME" in message
    assert snapshot(run_dir) == before
    assert (run_dir / "summary.json").read_bytes() == summary_before  # no merged summary

    # way out 1: a new run directory, whose summary has no spec-only figure
    fresh = tmp_path / "fresh"
    other = cli(str(changed), "-o", str(fresh))
    assert other.returncode == 0, other.stderr
    assert "spec-only accuracy n/a" in other.stdout
    assert json.loads((fresh / "manifest.json").read_text())["config"]["controls"] == [
        "question_only"
    ]

    # way out 2: a new evidence layer in this run; its settings are recorded with it
    layered = cli(str(changed), "--new-layer", "no-spec", "-o", str(run_dir))
    assert layered.returncode == 0, layered.stderr
    assert "spec-only accuracy n/a" in layered.stdout  # the old spec-only cells stay apart
    layers = [json.loads(line) for line in (run_dir / "layers.jsonl").read_text().splitlines()]
    assert layers[-1]["name"] == "no-spec"
    assert layers[-1]["settings"]["controls"] == ["question_only"]
    label = subprocess.run(  # the run's other commands open it at its latest layer
        [sys.executable, "-m", "metaeval.cli", "buildfind", "label", str(run_dir)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert label.returncode == 0, label.stderr
