"""`metaeval buildfind plan`: the paper-panel example validates offline and its planned cells
match a count by hand; a bad agent is refused naming the file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "buildfind-paper-panel.yaml"


def plan(config: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}  # offline
    return subprocess.run(
        [sys.executable, "-m", "metaeval.cli", "buildfind", "plan", str(config)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def test_paper_panel_example_plans_the_matched_grid_offline():
    result = plan(EXAMPLE)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    # 6 builders x 2 tasks x r_build 1 = 12 builds; matched pairs: 3 x 3 per effort, 2 efforts
    # = 18 of 6 x 6 = 36; formal finds 18 x 2 tasks x 1 x r_find 3 = 108; controls 2 slices x
    # 2 tasks x 6 finders x 3 = 72
    assert lines[1].startswith("builds: 12 ")
    assert lines[2] == "formal pairs: 18 of 36 (find_pairs: matched)"
    assert lines[3].startswith("formal finds: 108 ")
    assert lines[4].startswith("control finds: 72 ")
    panels = [line.strip() for line in lines[6:]]
    assert panels[0].startswith("high: 3 builder(s) x 3 finder(s) = 9 pair(s)")
    assert panels[1].startswith("low: 3 builder(s) x 3 finder(s) = 9 pair(s)")
    assert "f-codex-low" not in panels[0] and "f-codex-low" in panels[1]


def test_plan_refuses_an_unknown_agent_naming_the_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    text = EXAMPLE.read_text().replace(
        "pack: buildfind-pack", f"pack: {ROOT / 'examples' / 'buildfind-pack'}"
    )
    bad.write_text(text.replace("agent: gemini-cli", "agent: gemini-clii", 1))
    result = plan(bad)
    assert result.returncode == 2
    assert str(bad) in result.stderr + result.stdout
    assert "gemini-clii" in result.stderr + result.stdout


def test_the_runs_phases_plan_the_cells_counted_by_hand():
    """The phases `buildfind run` executes plan the cells of the hand count above."""
    import json

    from metaeval.protocols.buildfind.config import load_config
    from metaeval.protocols.buildfind.pack import load_pack
    from metaeval.protocols.buildfind.plan import build_phase, find_phase
    from metaeval.protocols.buildfind.records import BUILDS, FINDS, parse_build

    config = load_config(EXAMPLE)
    pack = load_pack(config.pack)
    tasks = [pack.tasks[t] for t in (config.tasks or sorted(pack.tasks))]
    builds = build_phase(config, tasks)
    assert builds.kind == BUILDS and len(builds.keys) == 12
    old = ROOT / "tests" / "fixtures" / "old_format" / "buildfind" / "release" / "records"
    written = parse_build(json.loads((old / "builds.jsonl").read_text().splitlines()[0]))
    every_build_ok = {(k["task"], k["builder"], k["build_trial"]): written for k in builds.keys}
    finds = find_phase(config, tasks, every_build_ok)
    formal = [k for k in finds.keys if k["slice"] == "formal"]
    assert finds.kind == FINDS and len(formal) == 108 and len(finds.keys) == 108 + 72
    efforts = {a.name: a.effort for a in [*config.builders, *config.finders]}
    assert all(efforts[k["builder"]] == efforts[k["finder"]] for k in formal)  # matched pairs
    # the artifact of a builder no longer configured is read by every finder: 6 x r_find 3
    retired = find_phase(config, tasks[:1], {(tasks[0].task_id, "retired", 0): written})
    assert len([k for k in retired.keys if k["slice"] == "formal"]) == 18
