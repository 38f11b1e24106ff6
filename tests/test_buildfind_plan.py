"""`metaeval buildfind plan`: the paper-grid example validates offline, its planned cells
match the paper's Table 5 counts and the estimate follows the price table; a bad agent is
refused naming the file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "buildfind-paper-panel.yaml"


def plan(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}  # offline
    return subprocess.run(
        [sys.executable, "-m", "metaeval.cli", "buildfind", "plan", str(config), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def test_paper_panel_example_plans_the_papers_grid_offline(tmp_path):
    """The paper's Table 5 counts: 2 tasks x 12 builders x 2 build trials = 48 builds; every
    finder on every builder, 12 x 12 = 144 pairs; 48 artifacts x 12 finders x 3 = 1728 formal
    finds (36 per artifact, so the paper's 41 compile-pass artifacts give 1476); 2 controls x
    2 tasks x 12 finders x 3 = 144 control finds (72 + 72)."""
    result = plan(EXAMPLE)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[1].startswith("builds: 48 (12 builder(s) x 2 task(s) x r_build 2)")
    assert lines[2] == "formal pairs: 144 of 144 (find_pairs: all)"
    assert lines[3].startswith("formal finds: 1728 ")
    assert lines[4].startswith("formal finds per artifact: 36 ")
    assert 41 * 36 == 1476
    assert lines[5].startswith("control finds: 144 ")
    panels = [line.strip() for line in lines[7:10]]
    assert panels[0].startswith("high: 6 builder(s) x 6 finder(s) = 36 pair(s)")
    assert panels[1].startswith("low: 6 builder(s) x 6 finder(s) = 36 pair(s)")
    assert panels[2].startswith("pooled tables only (efforts differ): 12 builder(s) x 12")
    # the estimate: Table 17's per-run means; no bundled price for these models
    from metaeval.protocols.buildfind.plan_cost import BUILD_TOKENS, CONTROL_TOKENS, FIND_TOKENS

    tokens = 48 * sum(BUILD_TOKENS) + 1728 * sum(FIND_TOKENS) + 144 * sum(CONTROL_TOKENS)
    assert f"estimated tokens: {tokens / 1e6:,.1f}M" in result.stdout
    assert "unpriced (no price for the model): claude-opus47-high" in result.stdout
    assert "estimated cost: unknown (no agent's model is in the price table" in result.stdout
    # with a price table for two of the models, the cost is theirs alone
    prices = tmp_path / "prices.json"
    prices.write_text(
        '{"version": "t", "models": {"openai/gpt-5.5": {"input_per_mtok": 2.0, '
        '"output_per_mtok": 10.0}, "claude-opus-4-7": {"input_per_mtok": 5.0, '
        '"output_per_mtok": 25.0}}}'
    )
    priced = plan(EXAMPLE, "--prices", str(prices))
    assert priced.returncode == 0, priced.stdout + priced.stderr

    def usd(per_mtok_in: float, per_mtok_out: float) -> float:
        # one model at two efforts: 2 builders, 2 finders; 8 builds, 2 x 144 formal finds
        # (each finder reads 48 artifacts x 3), 2 x 12 control finds
        runs = ((8, BUILD_TOKENS), (288, FIND_TOKENS), (24, CONTROL_TOKENS))
        return sum(n * (i * per_mtok_in + o * per_mtok_out) / 1e6 for n, (i, o) in runs)

    want = usd(2.0, 10.0) + usd(5.0, 25.0)
    assert f"estimated cost: ${want:,.2f} for the priced agents" in priced.stdout
    assert "codex-gpt55" not in priced.stdout.split("unpriced")[1]


def test_plan_refuses_an_unknown_agent_naming_the_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    text = EXAMPLE.read_text().replace(
        "pack: buildfind-pack", f"pack: {ROOT / 'examples' / 'buildfind-pack'}"
    )
    bad.write_text(text.replace("agent: codex,", "agent: codexx,", 1))
    result = plan(bad)
    assert result.returncode == 2
    assert str(bad) in result.stderr + result.stdout
    assert "codexx" in result.stderr + result.stdout


def test_the_runs_phases_plan_the_cells_counted_by_hand():
    """The phases `buildfind run` executes plan the cells of the hand count above."""
    import json

    from metaeval.protocols.buildfind.config import load_config
    from metaeval.protocols.buildfind.pack.load import load_pack
    from metaeval.protocols.buildfind.plan import build_phase, find_phase
    from metaeval.protocols.buildfind.records import BUILDS, FINDS, parse_build

    config = load_config(EXAMPLE)
    pack = load_pack(config.pack)
    tasks = [pack.tasks[t] for t in (config.tasks or sorted(pack.tasks))]
    builds = build_phase(config, tasks)
    assert builds.kind == BUILDS and len(builds.keys) == 48
    old = ROOT / "tests" / "fixtures" / "old_format" / "buildfind" / "release" / "records"
    written = parse_build(json.loads((old / "builds.jsonl").read_text().splitlines()[0]))
    every_build_ok = {(k["task"], k["builder"], k["build_trial"]): written for k in builds.keys}
    finds = find_phase(config, tasks, every_build_ok)
    formal = [k for k in finds.keys if k["slice"] == "formal"]
    assert finds.kind == FINDS and len(formal) == 1728 and len(finds.keys) == 1728 + 144
    efforts = {a.name: a.effort for a in [*config.builders, *config.finders]}
    crossed = [k for k in formal if efforts[k["builder"]] != efforts[k["finder"]]]
    assert len(crossed) == 1728 // 2  # the full grid: half its pairs cross efforts
    # with find_pairs: matched only the same-effort half is run
    matched = find_phase(config.model_copy(update={"find_pairs": "matched"}), tasks, every_build_ok)
    assert len([k for k in matched.keys if k["slice"] == "formal"]) == 1728 // 2
    # the artifact of a builder no longer configured is read by every finder: 12 x r_find 3
    retired = find_phase(config, tasks[:1], {(tasks[0].task_id, "retired", 0): written})
    assert len([k for k in retired.keys if k["slice"] == "formal"]) == 36
